// Unary elementwise primitives on numbers: negation, rounding, powers and the
// floating-point math functions, with XLA's semantics on CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "meshsim/kernels/scalar_math.h"
#include "meshsim/kernels/xla_math.h"
#include "meshsim/primitives/elementwise_family.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {
using namespace elementwise;

// XLA squares a complex number as (x - y)(x + y) + 2xy i, with a real part of
// exactly +0.0 where |x| = |y| is finite (no -0.0), NaN where both are infinite.
template <class T> T square_op(T x) { return mul_op(x, x); }
template <class F>
std::complex<F> square_op(std::complex<F> z_in) {
  const std::complex<F> z = flush_subnormal(z_in);
  const F x = z.real(), y = z.imag();
  const F re = std::fabs(x) == std::fabs(y) && std::isfinite(x) ? F(0) : (x - y) * (x + y);
  return flush_subnormal(std::complex<F>(re, F(2) * x * y));
}

// libm's sinh, asin, asinh and atanh return a tiny real argument itself; XLA's
// expansions multiply it, so a subnormal result is flushed (core/denormals.h).
template <class F>
auto flushing(F f) {
  return [f](auto x) {
    const auto y = f(x);
    if constexpr (std::is_floating_point_v<decltype(y)>) return flush_subnormal(y);
    else return y;
  };
}

// XLA's own float32 code for a function (kernels/xla_math.h) on float32
// elements or batches, `other` on the rest.
#define XLA_MATH(f) [](auto v) { return xla_math::f(v); }
template <class X> struct ElementOf { using type = X; };
template <class T, class A> struct ElementOf<xsimd::batch<T, A>> { using type = T; };
template <class X, class F32, class Other>
auto xla_f32_or(const X& x, F32 f32, Other other) {
  if constexpr (std::is_same_v<typename ElementOf<X>::type, float>) return f32(x);
  else return other(x);
}
// XLA's own code on float32 and on float64 elements or batches, `other` on
// the rest (complex elements).
template <class X, class F32, class F64, class Other>
auto xla_real_or(const X& x, F32 f32, F64 f64, Other other) {
  using Element = typename ElementOf<X>::type;
  if constexpr (std::is_same_v<Element, float>) return f32(x);
  else if constexpr (std::is_same_v<Element, double>) return f64(x);
  else return other(x);
}
#define XLA_REAL_OR(f, other) [](auto x) { return xla_real_or(x, XLA_MATH(f##_f32), XLA_MATH(f##_f64), other); }

// A scalar function applied lane by lane, for a batch whose type XLA computes
// with libm.
template <class F>
auto lanewise(F f) {
  return [f](auto batch) {
    using B = decltype(batch);
    alignas(64) typename B::value_type lanes[B::size];
    batch.store_aligned(lanes);
    for (auto& lane : lanes) lane = f(lane);
    return B::load_aligned(lanes);
  };
}

void round_primitive() {
  Primitive p;
  p.name = "round";
  p.operands = exactly(1);
  p.elementwise = true;
  p.vjp = zero_vjp;
  p.zero_derivative = true;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const int64_t method = params.get<int64_t>("rounding_method");
    if (method != 0 && method != 1)
      fail<ValueError>("round: rounding_method must be 0 (AWAY_FROM_ZERO) or 1 (TO_NEAREST_EVEN), got ",
                       method);
    return same_type_as_input("round", Accepts::Float, in);
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const bool to_even = params.get<int64_t>("rounding_method") == 1;
    return dispatch_float(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      using C = compute_type_t<T>;
      if (to_even)  // nearbyint rounds half to even in the default rounding mode
        return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [](T x) { return T(std::nearbyint(C(x))); }));
      return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [](T x) { return T(std::round(C(x))); }));
    });
  };
  register_primitive(std::move(p));
}


// JAX's chain of multiplies in a narrow float: XLA rounds every product to
// the narrow type (computed in float32, denormals flushed).
template <class T>
T integer_pow_narrow(T x, int64_t y) {
  if (y == 0) return T(1.0f);
  auto mul = [](T a, T b) { return from_compute<T>(to_compute(a) * to_compute(b)); };
  uint64_t n = y < 0 ? uint64_t(-y) : uint64_t(y);
  T acc = x;
  bool started = false;
  while (n > 0) {
    if (n & 1) {
      acc = started ? mul(acc, x) : x;
      started = true;
    }
    n >>= 1;
    if (n > 0) x = mul(x, x);
  }
  return y < 0 ? from_compute<T>(1.0f / to_compute(acc)) : acc;
}

void integer_pow_primitive() {
  Primitive p;
  p.name = "integer_pow";
  p.operands = exactly(1);
  p.elementwise = true;
  p.bf16_widened_once = false;  // XLA multiplies by squaring in bfloat16
  p.fma_product = [](const Params& params) { return params.get<int64_t>("y") == 2; };  // x * x
  p.vjp = [](const VjpArgs& a) {
    const int64_t y = a.params.get<int64_t>("y");
    const Value &g = *a.ct[0], &x = a.in[0];
    if (y == 0) return Cotangents(1);
    if (y == 1) return Cotangents{g};
    // JAX's rule: g * (y * x^(y-1)), with x itself for x^1.
    const Value power = y == 2 ? x : op::integer_pow(x, y - 1);
    return Cotangents{op::mul(g, op::mul(lit(x, double(y)), power))};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const int64_t y = params.get<int64_t>("y");
    if (y < 0 && is_integer(in[0].dtype))
      fail<TypeError>("Integers cannot be raised to negative powers, got integer_pow(",
                      in[0].str_short(), ", ", y, ")");
    return same_type_as_input("integer_pow", Accepts::Number, in);
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const int64_t y = params.get<int64_t>("y");
    return dispatch_number(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!is_small_float_v<T>) {
        // integer_pow_op's products for the common small powers, as loops that vectorise.
        if (y == 2) return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [](T x) { return mul_op(x, x); }));
        if (y == 3)
          return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [](T x) { return mul_op(x, mul_op(x, x)); }));
      }
      return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [y](T x) {
        if constexpr (is_small_float_v<T>) return integer_pow_narrow(x, y);
        else return integer_pow_op(x, y);
      }));
    });
  };
  register_primitive(std::move(p));
}

// reduce_precision rounds a float's bits to a format of `exponent_bits` and
// `mantissa_bits`, as XLA expands it: the mantissa to nearest, ties to even;
// then exponents above the format's range become ±inf and those at or below
// its smallest normal ±0; NaN stays as it is. `Bits` is the unsigned word of
// the source format (E exponent and M mantissa bits).
template <class Bits, int E, int M>
Bits reduce_precision_bits(Bits bits, int64_t exponent_bits, int64_t mantissa_bits) {
  if (mantissa_bits < M) {
    const int dropped = M - static_cast<int>(mantissa_bits);
    const Bits last_kept = (bits >> dropped) & Bits(1);
    const Bits bias = Bits(last_kept + ((Bits(1) << (dropped - 1)) - 1));
    bits = Bits(Bits(bits + bias) & Bits(~((Bits(1) << dropped) - 1)));
  }
  if (exponent_bits < E) {
    const Bits src_bias = (Bits(1) << (E - 1)) - 1;
    const Bits reduced_bias = (Bits(1) << (exponent_bits - 1)) - 1;
    const Bits exponent_mask = Bits(((Bits(1) << E) - 1) << M);
    const Bits signed_zero = bits & Bits(Bits(1) << (E + M));
    const Bits exponent = bits & exponent_mask;
    if (exponent > Bits((src_bias + reduced_bias) << M)) return signed_zero | exponent_mask;
    if (exponent <= Bits((src_bias - reduced_bias) << M)) return signed_zero;
  }
  return bits;
}

template <class F, class Bits, int E, int M>
F reduce_precision_wide(F x, int64_t exponent_bits, int64_t mantissa_bits) {
  if (std::isnan(x)) return x;
  Bits bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = reduce_precision_bits<Bits, E, M>(bits, exponent_bits, mantissa_bits);
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

// float32 and float64 are rounded in their own width, as is float16; bfloat16 and the
// float8 formats through float32 (as XLA's CPU backend computes them, so a NaN comes
// back as the quiet NaN of its sign).
template <class T>
T reduce_precision_element(T x, int64_t exponent_bits, int64_t mantissa_bits) {
  if constexpr (std::is_same_v<T, float>) {
    return reduce_precision_wide<float, uint32_t, 8, 23>(x, exponent_bits, mantissa_bits);
  } else if constexpr (std::is_same_v<T, double>) {
    return reduce_precision_wide<double, uint64_t, 11, 52>(x, exponent_bits, mantissa_bits);
  } else if constexpr (std::is_same_v<T, float16>) {
    if (std::isnan(float(x))) return x;
    T r;
    r.bits = reduce_precision_bits<uint16_t, 5, 10>(x.bits, exponent_bits, mantissa_bits);
    return r;
  } else {
    if (exponent_bits >= 8 && mantissa_bits >= 23) return x;  // float32 would round nothing
    const float wide = float(x);
    if (std::isnan(wide))
      return T(std::signbit(wide) ? -std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::quiet_NaN());
    return T(reduce_precision_wide<float, uint32_t, 8, 23>(wide, exponent_bits, mantissa_bits));
  }
}

// reduce_precision is linear as JAX differentiates it: a tangent or cotangent is
// rounded like the value, so it is its own transpose (and forward mode, the
// transpose of the backward pass, rounds the tangent too).
void reduce_precision_primitive() {
  Primitive p;
  p.name = "reduce_precision";
  p.operands = exactly(1);
  p.elementwise = true;
  p.bf16_widened_once = false;  // works on the bits
  p.vjp = [](const VjpArgs& a) {
    return Cotangents{op::bind1("reduce_precision", {*a.ct[0]}, a.params)};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    if (params.get<int64_t>("exponent_bits") < 1)
      fail<ValueError>("reduce_precision: exponent_bits must be positive; got ",
                       params.get<int64_t>("exponent_bits"));
    if (params.get<int64_t>("mantissa_bits") < 0)
      fail<ValueError>("reduce_precision: mantissa_bits must be non-negative; got ",
                       params.get<int64_t>("mantissa_bits"));
    return same_type_as_input("reduce_precision", Accepts::Float, in);
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const int64_t exponent_bits = params.get<int64_t>("exponent_bits");
    const int64_t mantissa_bits = params.get<int64_t>("mantissa_bits");
    return dispatch_float(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [=](T x) {
        return reduce_precision_element(x, exponent_bits, mantissa_bits);
      }));
    });
  };
  register_primitive(std::move(p));
}

// select_n(which, *cases): cases[which] elementwise; `which` is bool (two
// cases) or an integer, scalar or of the cases' shape. Out-of-range indices
}  // namespace

void elementwise::register_unary_elementwise_primitives() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  unary<Accepts::Number>("neg", [](auto x) { return neg_op(x); },
                          d1([](auto& g, auto&, auto&) { return op::neg(g); }));
  unary<Accepts::Number>("sign", [](auto x) { return sign_op(x); }, zero_vjp);
  Primitive square = unary_primitive<Accepts::Number, true>(
      "square", [](auto x) { return square_op(x); },
      d1([](auto& g, auto& x, auto&) { return op::mul(g, op::mul(lit(x, 2.0), x)); }));
  square.fma_product = [](const Params&) { return true; };  // XLA multiplies x by itself
  register_primitive(std::move(square));
  unary<Accepts::Float, false>("floor", [](auto x) { return std::floor(x); }, zero_vjp);
  unary<Accepts::Float, false>("ceil", [](auto x) { return std::ceil(x); }, zero_vjp);
  // XLA's own float32 and float64 forms (kernels/xla_math.h); complex elements take complex_math.h's.
  unary_simd("exp", XLA_REAL_OR(exp, XLA_MATH(exp_f64)), XLA_REAL_OR(exp, [](auto v) { return exp_op(v); }), 87.0,
             d1([](auto& g, auto&, auto& y) { return op::mul(g, y); }), nullptr,
             [](float x) { return std::exp(x); });
  unary<Accepts::Inexact>("exp2", [](auto x) { return exp2_op(x); },
                        d1([](auto& g, auto&, auto& y) {
                          const Value ln2 = op::log(lit(y, 2.0));  // JAX's rule takes log(2) in the dtype
                          return op::mul(op::mul(ln2, g), y);
                        }));
  unary_simd("log", XLA_REAL_OR(log, XLA_MATH(log_f64)), XLA_REAL_OR(log, [](auto v) { return log_op(v); }), kInf,
             d1([](auto& g, auto& x, auto&) { return op::div(g, x); }), nullptr,
             [](float x) { return std::log(x); });
  unary_simd("log1p", XLA_REAL_OR(log1p, XLA_MATH(log1p_f64)), XLA_REAL_OR(log1p, [](auto v) { return log1p_op(v); }),
             kInf, d1([](auto& g, auto& x, auto&) { return op::div(g, op::add(x, lit(x, 1.0))); }));
  unary_simd("expm1", XLA_REAL_OR(expm1, XLA_MATH(expm1_f64)), XLA_REAL_OR(expm1, [](auto v) { return expm1_op(v); }),
             87.0, d1([](auto& g, auto&, auto& y) { return op::mul(g, op::add(y, lit(y, 1.0))); }),
             // XLA computes a float16 expm1 in float16 (exp and tanh widened), each step rounded.
             Float16Steps{[](float16 x) {
               using T = float16;
               const T half = T(float(x) * 0.5f);
               const T e = T(xla_math::exp_f32(float(x)));
               if (std::fabs(float(x)) > 0.5f) return T(float(e) - 1.0f);
               if (float(half) == 0.0f) return x;
               return T(float(T(xla_math::tanh_f32(float(half)))) * float(T(float(e) + 1.0f)));
             }});
  unary<Accepts::Inexact>("sqrt", [](auto x) { return sqrt_op(x); },
                        d1([](auto& g, auto&, auto& y) { return op::mul(g, op::div(lit(y, 0.5), y)); }));
  unary<Accepts::Inexact>("rsqrt", [](auto x) { return rsqrt_op(x); },
                        d1([](auto& g, auto& x, auto& y) {
                          return op::mul(g, op::mul(lit(x, -0.5), op::div(y, x)));
                        }));
  unary<Accepts::Float>("cbrt", [](auto x) { return std::cbrt(x); },
                        d1([](auto& g, auto& x, auto& y) {
                          return op::mul(g, op::mul(lit(x, 1.0 / 3.0), op::integer_pow(y, -2)));
                        }));
  unary_simd("tanh", XLA_REAL_OR(tanh, XLA_MATH(tanh_f64)), XLA_REAL_OR(tanh, [](auto z) { return tanh_op(z); }),
             kInf,
             d1([](auto& g, auto&, auto& y) {
               // JAX differentiates tanh as (g + g*y)(1 - y); its transpose rounds in this order.
               const Value m = op::mul(g, op::sub(lit(y, 1.0), y));
               return op::add_any(m, op::mul(m, y));
             }));
  // XLA's CPU sin and cos are libm's (sinf/cosf for float32), bit for bit; xsimd's differ by an
  // ulp on ~15% of inputs, which shows in printed values. Complex elements take complex_math.h's.
  unary<Accepts::Inexact>("sin", [](auto x) { return sin_op(x); },
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, op::cos(x)); }));
  unary<Accepts::Inexact>("cos", [](auto x) { return cos_op(x); },
                        d1([](auto& g, auto& x, auto&) {
                          const Value s = op::sin(x);
                          return op::mul(op::neg(g), s);
                        }));
  unary<Accepts::Inexact>("tan", [](auto x) { return tan_op(x); },
                        d1([](auto& g, auto&, auto& y) { return op::mul(g, op::add(lit(y, 1.0), op::square(y))); }));
  // Not flushed on the way in and out (which only complex elements would be): the complex
  // expansions call atan2 on the operand's parts as they are and return its subnormals.
  unary<Accepts::Inexact, false>("asin", flushing([](auto x) { return asin_op(x); }),
                        d1([](auto& g, auto& x, auto&) {
                          return op::mul(g, op::rsqrt(op::sub(lit(x, 1.0), op::square(x))));
                        }));
  unary<Accepts::Inexact, false>("acos", [](auto x) { return acos_op(x); },
                        d1([](auto& g, auto& x, auto&) {
                          const Value d = op::neg(op::rsqrt(op::sub(lit(x, 1.0), op::square(x))));
                          return op::mul(g, d);
                        }));
  unary<Accepts::Inexact>("atan", [](auto x) { return atan_op(x); },
                        d1([](auto& g, auto& x, auto&) { return op::div(g, op::add(lit(x, 1.0), op::square(x))); }));
  unary<Accepts::Inexact>("sinh", flushing([](auto x) { return sinh_op(x); }),
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, op::cosh(x)); }));
  unary<Accepts::Inexact>("cosh", [](auto x) { return cosh_op(x); },
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, op::sinh(x)); }));
  unary<Accepts::Inexact, false>("asinh", flushing([](auto x) { return asinh_op(x); }),
                        d1([](auto& g, auto& x, auto&) {
                          return op::mul(g, op::rsqrt(op::add(op::square(x), lit(x, 1.0))));
                        }));
  unary<Accepts::Inexact, false>("acosh", [](auto x) { return acosh_op(x); },
                        d1([](auto& g, auto& x, auto&) {
                          return op::mul(g, op::rsqrt(op::sub(op::square(x), lit(x, 1.0))));
                        }));
  unary<Accepts::Inexact>("atanh", flushing([](auto x) { return atanh_op(x); }),
                        d1([](auto& g, auto& x, auto&) {
                          const Value r = op::integer_pow(op::add(lit(x, 1.0), x), -1);
                          const Value d = op::sub(lit(x, 1.0), x);
                          return op::div(op::mul(r, g), d);
                        }));
  unary_simd(
      "logistic",
      [](auto x) {
        return xla_f32_or(x, XLA_MATH(logistic_f32), [](auto v) { return decltype(v)(1) / (decltype(v)(1) + xsimd::exp(-v)); });
      },
      [](auto x) { return xla_f32_or(x, XLA_MATH(logistic_f32), [](auto v) { return logistic_op(v); }); }, 87.0,
      d1([](auto& g, auto&, auto& y) { return op::mul(g, op::mul(y, op::sub(lit(y, 1.0), y))); }),
      // XLA expands a narrow logistic as 1 / (1 + exp(-x)), each step rounded to the format.
      [](auto x) {
        using T = decltype(x);
        const T e = T(std::exp(-float(x)));
        const T s = T(1.0f + float(e));
        return T(1.0f / float(s));
      });
  unary_simd<Accepts::Float>(
      "erf", [](auto x) { return xla_f32_or(x, XLA_MATH(erf_f32), lanewise([](double v) { return std::erf(v); })); },
      [](auto x) { return xla_f32_or(x, XLA_MATH(erf_f32), [](auto v) { return std::erf(v); }); }, kInf,
                        d1([](auto& g, auto& x, auto&) {
                          const Value e = op::exp(op::neg(op::square(x)));
                          return op::mul(op::mul(lit(x, kTwoOverSqrtPi), g), e);
                        }));
  unary<Accepts::Float>("erfc", [](auto x) { return std::erfc(x); },
                        d1([](auto& g, auto& x, auto&) {
                          const Value e = op::exp(op::neg(op::square(x)));
                          return op::mul(op::mul(lit(x, -kTwoOverSqrtPi), g), e);
                        }));
  unary<Accepts::Float>("erf_inv", [](auto x) { return erf_inv_op(x); },
                        d1([](auto& g, auto&, auto& y) {
                          const Value e = op::exp(op::square(y));
                          return op::mul(op::mul(lit(y, 1.0 / kTwoOverSqrtPi), g), e);
                        }));
  unary_predicate<Accepts::Float>("is_finite", [](auto x) { return std::isfinite(x); });
  round_primitive();
  integer_pow_primitive();
  reduce_precision_primitive();
}

}  // namespace meshsim
