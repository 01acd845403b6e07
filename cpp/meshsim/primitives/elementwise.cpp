// Elementwise primitives: unary math, binary arithmetic, bit operations,
// comparisons, selection and casts, with XLA's semantics on CPU.
// lax semantics: operands have equal shapes and dtypes (the Python lax layer
// broadcasts size-1 dimensions first, as a zero-copy view), except that either
// operand of a binary operation may be a scalar (`mul a 2.0:f32[]`, as JAX
// 0.10 writes it), as may select_n's predicate and clamp's bounds.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/elementwise.h"
#include "meshsim/primitives/families.h"
#include "meshsim/sharding/rules.h"

namespace meshsim {
namespace {

// ---------------------------------------------------------------------------
// Scalar semantics. Integer arithmetic wraps around as in XLA: it runs on an
// unsigned type at least as wide as `unsigned`, since signed overflow (and
// uint16 * uint16 promoted to int) is undefined behaviour in C++.

template <class T, bool = std::is_integral_v<T>>
struct ArithType { using type = T; };
template <class T>
struct ArithType<T, true> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <class T> using Arith = typename ArithType<T>::type;

template <class T> T add_op(T x, T y) { return T(Arith<T>(x) + Arith<T>(y)); }
template <class T> T sub_op(T x, T y) { return T(Arith<T>(x) - Arith<T>(y)); }
template <class T> T mul_op(T x, T y) { return T(Arith<T>(x) * Arith<T>(y)); }
template <class T> T neg_op(T x) { return T(Arith<T>(0) - Arith<T>(x)); }

// XLA on CPU: x / 0 is -1 (all bits set), x % 0 is x, and INT_MIN / -1 wraps
// (to INT_MIN, remainder 0) instead of trapping.
template <class T> T div_op(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0) return T(-1);
    if constexpr (std::is_signed_v<T>) if (y == -1) return neg_op(x);
  }
  return x / y;
}
template <class T> T rem_op(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0) return x;
    if constexpr (std::is_signed_v<T>) if (y == -1) return T(0);
    return x % y;
  } else {
    return std::fmod(x, y);
  }
}

// max/min propagate NaN and order -0 below +0, as XLA does; written as
// selects so that the loops vectorise.
template <class T> T max_op(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    T larger = x > y ? x : y;
    larger = x == y ? (std::signbit(x) ? y : x) : larger;
    return x != x ? x : y != y ? y : larger;
  }
  return x > y ? x : y;
}
template <class T> T min_op(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    T smaller = x < y ? x : y;
    smaller = x == y ? (std::signbit(x) ? x : y) : smaller;
    return x != x ? x : y != y ? y : smaller;
  }
  return x < y ? x : y;
}

template <class T> T sign_op(T x) {
  if constexpr (std::is_floating_point_v<T>) return x > 0 ? T(1) : x < 0 ? T(-1) : x;  // keeps ±0, NaN
  else if constexpr (std::is_signed_v<T>) return T((x > 0) - (x < 0));
  else return T(x != 0);
}

template <class T> T abs_op(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::abs(x);
  else return x < 0 ? neg_op(x) : x;
}

// 1 / (1 + exp(-x)) without overflowing exp for large |x|.
template <class T> T logistic_op(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// XLA:CPU's float32 erf_inv, bit for bit, so that random.normal reproduces
// JAX: StableHLO's erfInv32 (M. Giles' polynomial) on top of XLA's own log1p
// and log, with the multiply-adds XLA fuses into FMAs on CPU (written as
// explicit fmaf, so the result does not depend on the target ISA). The other
// products and sums must stay unfused: fp-contract=off.
// A clone for CPUs with FMA turns each fmaf into one instruction.
#define MESHSIM_NO_CONTRACT __attribute__((optimize("fp-contract=off"), target_clones("fma", "default")))

// XLA:CPU's log (the Cephes polynomial of Eigen) for x > 0.
MESHSIM_NO_CONTRACT float xla_log_f32(float x) {
  if (!(x > 0.0f) || std::isinf(x)) return x == 0.0f ? -HUGE_VALF : x + std::nanf("");
  static constexpr float kP[9] = {7.0376836292E-2f, -1.1514610310E-1f, 1.1676998740E-1f,
                                  -1.2420140846E-1f, 1.4249322787E-1f, -1.6668057665E-1f,
                                  2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f};
  x = std::max(x, std::numeric_limits<float>::min());
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  float e = 1.0f + static_cast<float>(static_cast<int32_t>(bits >> 23) - 0x7f);
  bits = (bits & ~0x7f800000u) | 0x3f000000u;  // mantissa in [0.5, 1)
  float m;
  std::memcpy(&m, &bits, sizeof m);
  if (m < 0.707106781186547524f) {  // shift to [sqrt(1/2), sqrt(2)) - 1
    e -= 1.0f;
    m = (m - 1.0f) + m;
  } else {
    m = m - 1.0f;
  }
  const float m2 = m * m, m3 = m2 * m;
  float y = std::fmaf(m, kP[0], kP[1]), y1 = std::fmaf(m, kP[3], kP[4]), y2 = std::fmaf(m, kP[6], kP[7]);
  y = std::fmaf(y, m, kP[2]);
  y1 = std::fmaf(y1, m, kP[5]);
  y2 = std::fmaf(y2, m, kP[8]);
  y = std::fmaf(y, m3, y1);
  y = std::fmaf(y, m3, y2);
  y = std::fmaf(y, m3, -2.12194440e-4f * e);
  const float r = std::fmaf(-0.5f, m2, m) + y;
  return std::fmaf(0.693359375f, e, r);
}

// XLA:CPU's log1p: a Cephes rational function for |x| < sqrt(2) - 1, else log(1 + x).
MESHSIM_NO_CONTRACT float xla_log1p_f32(float x) {
  if (!(std::fabs(x) < 0.41421356237309504880f)) return xla_log_f32(x + 1.0f);
  static constexpr float kNum[7] = {4.5270000862445199635215E-5f, 4.9854102823193375972212E-1f,
                                    6.5787325942061044846969E0f,  2.9911919328553073277375E1f,
                                    6.0949667980987787057556E1f,  5.7112963590585538103336E1f,
                                    2.0039553499201281259648E1f};
  static constexpr float kDen[7] = {1.0f,
                                    1.5062909083469192043167E1f,
                                    8.3047565967967209469434E1f,
                                    2.2176239823732856465394E2f,
                                    3.0909872225312059774938E2f,
                                    2.1642788614495947685003E2f,
                                    6.0118660497603843919306E1f};
  float num = 0.0f, den = 0.0f;
  for (int i = 0; i < 7; ++i) {
    num = std::fmaf(num, x, kNum[i]);
    den = std::fmaf(den, x, kDen[i]);
  }
  const float x2 = x * x;
  return x + std::fmaf(-0.5f, x2, (x * x2) * (num / den));
}

MESHSIM_NO_CONTRACT float erf_inv_f32(float x) {
  static constexpr float kLt5[9] = {2.81022636e-08f, 3.43273939e-07f, -3.5233877e-06f,
                                    -4.39150654e-06f, 0.00021858087f, -0.00125372503f,
                                    -0.00417768164f, 0.246640727f, 1.50140941f};
  static constexpr float kGe5[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                    -0.00367342844f, 0.00573950773f, -0.0076224613f,
                                    0.00943887047f, 1.00167406f, 2.83297682f};
  const float w = -xla_log1p_f32(x * -x);
  const bool lt = w < 5.0f;
  const float v = lt ? w - 2.5f : std::sqrt(w) - 3.0f;
  const float* c = lt ? kLt5 : kGe5;
  float p = c[0];
  for (int i = 1; i < 9; ++i) p = std::fmaf(p, v, c[i]);
  return std::fabs(x) == 1.0f ? x * std::numeric_limits<float>::infinity() : p * x;
}
#undef MESHSIM_NO_CONTRACT

// float64: the float32 estimate refined by Newton steps on erf(y) = x, which
// reach full double precision (XLA has its own f64 polynomial; x64 is opt-in).
double erf_inv_f64(double x) {
  if (!(std::fabs(x) < 1.0)) return std::fabs(x) == 1.0 ? x * HUGE_VAL : std::nan("");
  double y = erf_inv_f32(static_cast<float>(x));
  const double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 3 && std::isfinite(y); ++i)
    y -= (std::erf(y) - x) / (two_over_sqrt_pi * std::exp(-y * y));
  return y;
}

template <class T> T erf_inv_op(T x) {
  if constexpr (std::is_same_v<T, float>) return erf_inv_f32(x);
  else return erf_inv_f64(x);
}

template <class T> using Bits = std::make_unsigned_t<T>;
constexpr unsigned kBitsPerByte = 8;

template <class T> T population_count_op(T x) { return T(__builtin_popcountll(Bits<T>(x))); }
template <class T> T clz_op(T x) {
  constexpr int bits = sizeof(T) * kBitsPerByte;
  const Bits<T> u = Bits<T>(x);
  return u == 0 ? T(bits) : T(__builtin_clzll(u) - (64 - bits));
}

// Shift amounts outside [0, bits) give 0, or the sign fill for arithmetic
// right shifts (which act on the bit pattern, also for unsigned types).
template <class T> T shift_left_op(T x, T y) {
  constexpr Bits<T> bits = sizeof(T) * kBitsPerByte;
  return Bits<T>(y) >= bits ? T(0) : T(Bits<T>(x) << Bits<T>(y));
}
template <class T> T shift_right_logical_op(T x, T y) {
  constexpr Bits<T> bits = sizeof(T) * kBitsPerByte;
  return Bits<T>(y) >= bits ? T(0) : T(Bits<T>(x) >> Bits<T>(y));
}
template <class T> T shift_right_arithmetic_op(T x, T y) {
  constexpr Bits<T> bits = sizeof(T) * kBitsPerByte;
  const auto s = static_cast<std::make_signed_t<T>>(x);
  return Bits<T>(y) >= bits ? T(s < 0 ? -1 : 0) : T(s >> Bits<T>(y));
}

// JAX lowers integer_pow to this chain of multiplies (square-and-multiply,
// then one division for negative powers); same order, same rounding.
template <class T> T integer_pow_op(T x, int64_t y) {
  if (y == 0) return T(1);
  uint64_t n = y < 0 ? uint64_t(-y) : uint64_t(y);
  T acc = x;
  bool started = false;
  while (n > 0) {
    if (n & 1) {
      acc = started ? mul_op(acc, x) : x;
      started = true;
    }
    n >>= 1;
    if (n > 0) x = mul_op(x, x);
  }
  return y < 0 ? T(1) / acc : acc;
}

// Casts saturate from float to integer, with NaN -> 0 (XLA's convert on CPU);
// integer narrowing wraps.
template <class Out, class In> Out convert_op(In x) {
  if constexpr (std::is_same_v<Out, bool>) {
    return x != In(0);
  } else if constexpr (std::is_floating_point_v<In> && std::is_integral_v<Out>) {
    if (std::isnan(x)) return Out(0);
    if (x <= In(std::numeric_limits<Out>::min())) return std::numeric_limits<Out>::min();
    if (x >= In(std::numeric_limits<Out>::max())) return std::numeric_limits<Out>::max();
    return static_cast<Out>(x);
  } else {
    return static_cast<Out>(x);
  }
}

// ---------------------------------------------------------------------------
// Dtype acceptance, worded as JAX's errors.

enum class Accepts { Float, Numeric, SignedNumeric, Integer, Bitwise, Any };

bool accepts(Accepts a, DType dt) {
  switch (a) {
    case Accepts::Float: return is_floating(dt);
    case Accepts::Numeric: return !is_bool(dt);
    case Accepts::SignedNumeric: return is_floating(dt) || is_signed_int(dt);
    case Accepts::Integer: return is_integer(dt);
    case Accepts::Bitwise: return is_bool(dt) || is_integer(dt);
    case Accepts::Any: return true;
  }
  return false;
}

const char* accepted_kinds(Accepts a) {
  switch (a) {
    case Accepts::Float: return "floating";
    case Accepts::Numeric: return "integer, floating";
    case Accepts::SignedNumeric: return "signedinteger, floating";
    case Accepts::Integer: return "integer";
    case Accepts::Bitwise: return "integer, bool";
    case Accepts::Any: return "any";
  }
  return "";
}

// Dispatch limited to the accepted dtypes, so each op is instantiated only
// where it means something (SignedNumeric reuses Numeric: the unsigned
// instantiations are never reached).
template <Accepts A, class F>
decltype(auto) dispatch_accepted(DType dt, F&& f) {
  if constexpr (A == Accepts::Float) return dispatch_float(dt, std::forward<F>(f));
  else if constexpr (A == Accepts::Numeric || A == Accepts::SignedNumeric)
    return dispatch_numeric(dt, std::forward<F>(f));
  else if constexpr (A == Accepts::Integer) return dispatch_integer(dt, std::forward<F>(f));
  else if constexpr (A == Accepts::Bitwise) return dispatch_bitwise(dt, std::forward<F>(f));
  else return dispatch_dtype(dt, std::forward<F>(f));
}

// `position` is the operand index for n-ary ops, -1 for unary ones.
void check_dtype(const std::string& name, Accepts a, DType dt, int position = -1) {
  if (accepts(a, dt)) return;
  if (position < 0)
    fail<TypeError>(name, " does not accept dtype ", dtype_name(dt), ". Accepted dtypes are subtypes of ",
                    accepted_kinds(a), ".");
  fail<TypeError>(name, " does not accept dtype ", dtype_name(dt), " at position ", position,
                  ". Accepted dtypes at position ", position, " are subtypes of ", accepted_kinds(a), ".");
}

template <class... Avals>
void check_same_dtypes(const std::string& name, const Avals&... in) {
  const DType first = std::get<0>(std::tie(in...)).dtype;
  if (((in.dtype == first) && ...)) return;
  std::string got;
  ((got += (got.empty() ? "" : ", ") + std::string(dtype_name(in.dtype))), ...);
  fail<TypeError>("lax.", name, " requires arguments to have the same dtypes, got ", got, ".");
}

// ---------------------------------------------------------------------------
// VJP rules, written with ops (g: the output's cotangent).

using VjpRule = std::function<Cotangents(const VjpArgs&)>;
namespace op = meshsim::ops;

// A unary rule from d(g, x, y) with y the output.
template <class D>
VjpRule d1(D d) {
  return [d](const VjpArgs& a) { return Cotangents{d(*a.ct[0], a.in[0], a.out[0])}; };
}

// A binary rule from the two partial cotangents dx(g, x, y, z), dy(g, x, y, z), z the output.
// A scalar operand's cotangent sums its broadcast result's.
template <class Dx, class Dy>
VjpRule d2(Dx dx, Dy dy) {
  return [dx, dy](const VjpArgs& a) {
    const Value &g = *a.ct[0], &x = a.in[0], &y = a.in[1], &z = a.out[0];
    auto unbroadcast = [](const Value& ct, const Value& operand) {
      const int64_t rank = aval_of(ct).ndim();
      if (aval_of(operand).ndim() > 0 || rank == 0) return ct;
      IntList all(rank);
      for (int64_t d = 0; d < rank; ++d) all[d] = d;
      return op::reduce_sum(ct, all);
    };
    return Cotangents{a.wants[0] ? Cotangent(unbroadcast(dx(g, x, y, z), x)) : std::nullopt,
                      a.wants[1] ? Cotangent(unbroadcast(dy(g, x, y, z), y)) : std::nullopt};
  };
}

// Piecewise-constant functions (sign, floor, round, ...): zero cotangent.
Cotangents zero_vjp(const VjpArgs& a) { return Cotangents(a.in.size()); }

Value c(const Value& like, double v) { return op::full_like(like, v); }

// 1 where x is the result z of max/min, 0.5 where y is too (JAX splits ties
// evenly); shaped as z, since x or y may be a scalar.
Value balanced_eq(const Value& x, const Value& z, const Value& y) {
  return op::select(op::eq(x, z), op::select(op::eq(y, z), c(z, 0.5), c(z, 1.0)), c(z, 0.0));
}

Value replace_zero(const Value& x) { return op::select(op::eq(x, c(x, 0.0)), c(x, 1.0), x); }

constexpr double kTwoOverSqrtPi = 1.1283791670955126;
constexpr double kLn2 = 0.6931471805599453;

// ---------------------------------------------------------------------------
// Families of primitives.

Avals same_type_as_input(const std::string& name, Accepts a, const Avals& in) {
  check_dtype(name, a, in[0].dtype);
  return Avals{like(in[0], in[0].shape, in[0].dtype, in[0].weak_type)};
}

// Op is a generic functor: template <class T> T operator()(T) const.
template <Accepts A, class Op>
void unary(const std::string& name, Op op, VjpRule vjp = nullptr) {
  Primitive p;
  p.name = name;
  const auto* rule = vjp.template target<Cotangents (*)(const VjpArgs&)>();
  p.zero_derivative = rule && *rule == zero_vjp;
  p.elementwise = true;
  p.vjp = std::move(vjp);
  p.abstract_eval = [name](const Avals& in, const Params&) { return same_type_as_input(name, A, in); };
  p.kernel = [op](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_accepted<A>(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_unary<T, T>(in[0], out[0].dtype, [&](T x) { return static_cast<T>(op(x)); })};
    });
  };
  register_primitive(std::move(p));
}

// A floating-point unary op computed in SIMD batches: VecOp maps an
// xsimd::batch, ScalarOp a scalar (used where |x| >= vec_limit; see
// map_unary_simd). Both must agree to a few ulp.
template <class VecOp, class ScalarOp>
void unary_simd(const std::string& name, VecOp vec_op, ScalarOp scalar_op, double vec_limit,
                VjpRule vjp) {
  Primitive p;
  p.name = name;
  p.elementwise = true;
  p.vjp = std::move(vjp);
  p.abstract_eval = [name](const Avals& in, const Params&) {
    return same_type_as_input(name, Accepts::Float, in);
  };
  p.kernel = [vec_op, scalar_op, vec_limit](const Tensors& in, const Params&, const Avals&) {
    return dispatch_float(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_unary_simd<T>(in[0], vec_op, [&](T x) { return static_cast<T>(scalar_op(x)); },
                                       static_cast<T>(vec_limit))};
    });
  };
  register_primitive(std::move(p));
}

// A unary test with a boolean result (is_finite).
template <Accepts A, class Op>
void unary_predicate(const std::string& name, Op op) {
  Primitive p;
  p.name = name;
  p.elementwise = true;
  p.abstract_eval = [name](const Avals& in, const Params&) {
    check_dtype(name, A, in[0].dtype);
    return Avals{like(in[0], in[0].shape, DType::Bool, in[0].weak_type)};
  };
  p.kernel = [op](const Tensors& in, const Params&, const Avals&) {
    return dispatch_accepted<A>(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_unary<T, bool>(in[0], DType::Bool, [&](T x) { return bool(op(x)); })};
    });
  };
  register_primitive(std::move(p));
}

void check_same_shapes(const std::string& name, const Aval& x, const Aval& y) {
  if (x.shape != y.shape)
    fail<TypeError>(name, " got incompatible shapes for broadcasting: ", shape_str(x.shape), ", ",
                    shape_str(y.shape), ".");
}

Aval binary_aval(const std::string& name, Accepts a, const Avals& in, DType out_dtype) {
  check_dtype(name, a, in[0].dtype, 0);
  check_dtype(name, a, in[1].dtype, 1);
  check_same_dtypes(name, in[0], in[1]);
  const Aval& shaped = in[0].ndim() == 0 ? in[1] : in[0];  // a scalar operand broadcasts
  if (in[0].ndim() > 0 && in[1].ndim() > 0) check_same_shapes(name, in[0], in[1]);
  return like(shaped, shaped.shape, out_dtype, in[0].weak_type && in[1].weak_type);
}

template <Accepts A, class Op>
void binary(const std::string& name, Op op, VjpRule vjp = nullptr) {
  Primitive p;
  p.name = name;
  p.elementwise = true;
  p.vjp = std::move(vjp);
  p.abstract_eval = [name](const Avals& in, const Params&) {
    return Avals{binary_aval(name, A, in, in[0].dtype)};
  };
  p.kernel = [op](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_accepted<A>(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_binary<T, T>(in[0], in[1], out[0].dtype,
                                      [&](T x, T y) { return static_cast<T>(op(x, y)); })};
    });
  };
  register_primitive(std::move(p));
}

template <class Op>
void comparison(const std::string& name, Op op) {
  Primitive p;
  p.name = name;
  p.elementwise = true;
  p.abstract_eval = [name](const Avals& in, const Params&) {
    return Avals{binary_aval(name, Accepts::Any, in, DType::Bool)};  // weak if both operands are
  };
  p.kernel = [op](const Tensors& in, const Params&, const Avals&) {
    return dispatch_dtype(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_binary<T, bool>(in[0], in[1], DType::Bool, op)};
    });
  };
  register_primitive(std::move(p));
}

// pow: a floating base; the exponent has the base's dtype or is an integer,
// which is converted to the base's dtype first (as JAX lowers it).
void pow_primitive() {
  Primitive p;
  p.name = "pow";
  p.elementwise = true;
  // An integer exponent is not differentiable; at y == 0 the base's cotangent is 0.
  p.vjp = [](const VjpArgs& a) {
    const Value &g = *a.ct[0], &x = a.in[0], &z = a.out[0];
    const bool int_exponent = is_integer(aval_of(a.in[1]).dtype);
    const Value y = int_exponent ? op::convert(a.in[1], aval_of(x).dtype) : a.in[1];
    Cotangents ct(2);
    if (a.wants[0]) {
      Value jac = op::mul(y, op::pow(x, op::sub(y, c(y, 1.0))));
      if (int_exponent) jac = op::select(op::eq(y, c(y, 0.0)), c(y, 0.0), jac);
      ct[0] = op::mul(g, jac);
    }
    if (a.wants[1] && !int_exponent) ct[1] = op::mul(g, op::mul(op::log(replace_zero(x)), z));
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params&) {
    const Aval &x = in[0], &y = in[1];
    check_dtype("pow", Accepts::Float, x.dtype, 0);
    check_dtype("pow", Accepts::Numeric, y.dtype, 1);
    if (!is_integer(y.dtype)) check_same_dtypes("pow", x, y);
    check_same_shapes("pow", x, y);
    return Avals{like(x, x.shape, x.dtype, x.weak_type && y.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_float(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      Tensor y = in[1];
      if (y.dtype() != out[0].dtype) {
        y = dispatch_integer(y.dtype(), [&](auto itag) {
          using I = decltype(itag);
          return map_unary<I, T>(in[1], out[0].dtype, [](I v) { return static_cast<T>(v); });
        });
      }
      return Tensors{map_binary<T, T>(in[0], y, out[0].dtype, [](T a, T b) { return std::pow(a, b); })};
    });
  };
  register_primitive(std::move(p));
}

void round_primitive() {
  Primitive p;
  p.name = "round";
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
      if (to_even)  // nearbyint rounds half to even in the default rounding mode
        return Tensors{map_unary<T, T>(in[0], out[0].dtype, [](T x) { return std::nearbyint(x); })};
      return Tensors{map_unary<T, T>(in[0], out[0].dtype, [](T x) { return std::round(x); })};
    });
  };
  register_primitive(std::move(p));
}

void integer_pow_primitive() {
  Primitive p;
  p.name = "integer_pow";
  p.elementwise = true;
  p.vjp = [](const VjpArgs& a) {
    const int64_t y = a.params.get<int64_t>("y");
    const Value &g = *a.ct[0], &x = a.in[0];
    if (y == 0) return Cotangents(1);
    if (y == 1) return Cotangents{g};
    return Cotangents{op::mul(g, op::mul(c(x, double(y)), op::integer_pow(x, y - 1)))};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const int64_t y = params.get<int64_t>("y");
    if (y < 0 && is_integer(in[0].dtype))
      fail<TypeError>("Integers cannot be raised to negative powers, got integer_pow(",
                      in[0].str_short(), ", ", y, ")");
    return same_type_as_input("integer_pow", Accepts::Numeric, in);
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const int64_t y = params.get<int64_t>("y");
    return dispatch_numeric(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_unary<T, T>(in[0], out[0].dtype, [y](T x) { return integer_pow_op(x, y); })};
    });
  };
  register_primitive(std::move(p));
}

// select_n(which, *cases): cases[which] elementwise; `which` is bool (two
// cases) or an integer, scalar or of the cases' shape. Out-of-range indices
// pick the nearest case, as XLA's tree of selects does.
Avals select_n_aval(const Avals& in) {
  if (in.size() < 2) fail<ValueError>("select_n() must have at least one case");
  const Aval& which = in[0];
  if (!is_bool(which.dtype) && !is_integer(which.dtype))
    fail<TypeError>("select `which` must be boolean or integer type, got ", dtype_name(which.dtype), ".");
  if (is_bool(which.dtype) && in.size() > 3)
    fail<TypeError>("select with boolean `which` cannot have > 2 cases.");
  bool weak = true;
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != in[1].shape) {
      std::string shapes;
      for (size_t j = 1; j < in.size(); ++j) shapes += (j > 1 ? ", " : "") + shape_str(in[j].shape);
      fail<TypeError>("select cases must have the same shapes, got [", shapes, "].");
    }
    if (in[i].dtype != in[1].dtype) check_same_dtypes("select", in[1], in[i]);
    weak = weak && in[i].weak_type;
  }
  if (!which.shape.empty() && which.shape != in[1].shape)
    fail<TypeError>("select `which` must be scalar or have the same shape as cases, got `which` shape ",
                    shape_str(which.shape), " but case shape ", shape_str(in[1].shape), ".");
  return Avals{like(in[1], in[1].shape, in[1].dtype, weak)};
}

// A case read either contiguously (step 1) or as one broadcast value (step 0).
template <class U>
struct CaseSource {
  const U* data;
  int64_t step;
};

Tensor select_n_kernel(const Tensors& in, const Avals& out) {
  const int64_t last = static_cast<int64_t>(in.size()) - 2;
  auto clamp_index = [last](auto w) -> int64_t {
    if constexpr (std::is_same_v<decltype(w), bool>) {
      return w ? std::min<int64_t>(1, last) : 0;
    } else {
      if (w <= 0) return 0;
      return static_cast<uint64_t>(w) > static_cast<uint64_t>(last) ? last : static_cast<int64_t>(w);
    }
  };
  const Tensor& which = in[0];
  if (which.ndim() == 0) {  // one case wins everywhere: return it as is
    const int64_t w = dispatch_bitwise(which.dtype(), [&](auto tag) {
      using W = decltype(tag);
      return clamp_index(*which.data<W>());
    });
    return in[1 + w];
  }
  // A contiguous bool `which` over two cases (jnp.where) is read as is;
  // anything else becomes a contiguous int32 index first.
  const bool direct = is_bool(which.dtype()) && which.is_contiguous() && in.size() == 3;
  const Tensor index = direct ? which : dispatch_bitwise(which.dtype(), [&](auto tag) {
    using W = decltype(tag);
    return map_unary<W, int32_t>(which, DType::Int32, [&](W w) { return static_cast<int32_t>(clamp_index(w)); });
  });
  // Elements are moved as raw bits of their width: one instantiation per itemsize.
  auto select_bits = [&](auto bits_tag) {
    using U = decltype(bits_tag);
    std::vector<Tensor> keep;
    std::vector<CaseSource<U>> cases;
    for (size_t i = 1; i < in.size(); ++i) {
      bool broadcast = true;
      for (int64_t s : in[i].strides()) broadcast = broadcast && s == 0;
      keep.push_back(broadcast ? in[i] : in[i].contiguous());
      cases.push_back({keep.back().template data<U>(), broadcast ? 0 : 1});
    }
    Tensor result = Tensor::empty(out[0].dtype, out[0].shape);
    U* o = result.data<U>();
    const int64_t n = result.size();
    if (direct) {
      const bool* w = index.data<bool>();
      const CaseSource<U> c0 = cases[0], c1 = cases[1];
      for (int64_t i = 0; i < n; ++i) o[i] = w[i] ? c1.data[i * c1.step] : c0.data[i * c0.step];
      return result;
    }
    const int32_t* w = index.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      const CaseSource<U>& c = cases[w[i]];
      o[i] = c.data[i * c.step];
    }
    return result;
  };
  switch (itemsize(out[0].dtype)) {
    case 1: return select_bits(uint8_t{});
    case 2: return select_bits(uint16_t{});
    case 4: return select_bits(uint32_t{});
    default: return select_bits(uint64_t{});
  }
}

// ---- sharding in types: rules and local plans (sharding/rules.h) ----------------

std::vector<Spec> select_n_rule(const Avals& in, const Params&, const Avals&) {
  const Avals cases(in.begin() + 1, in.end());
  const Aval* first = nullptr;
  for (const Aval& c : cases) {
    if (!c.mesh) continue;
    if (!first) first = &c;
    else if (spec_of(c) != spec_of(*first))
      fail<ShardingTypeError>("select cases must have the same shardings, got [", sharding_list(cases), "].");
  }
  if (!first) return {spec_of(in[1])};
  if (in[0].ndim() > 0 && in[0].mesh && spec_of(in[0]) != spec_of(*first))
    fail<ShardingTypeError>("select `which` must be scalar or have the same sharding as cases, got "
                            "`which` sharding ", type_sharding_repr(in[0]), " but case sharding ",
                            type_sharding_repr(in[1]), ".");
  return {spec_of(*first)};
}

std::vector<Spec> clamp_rule(const Avals& in, const Params&, const Avals&) { return {spec_of(in[1])}; }

void select_n_primitive() {
  Primitive p;
  p.name = "select_n";
  p.sharding_rule = select_n_rule;
  p.local_plan = elementwise_like();
  p.elementwise = true;
  // Case i gets g where it was selected, 0 elsewhere; `which` has no cotangent.
  p.vjp = [](const VjpArgs& a) {
    const Value& g = *a.ct[0];
    Cotangents ct(a.in.size());
    for (size_t i = 1; i < a.in.size(); ++i) {
      if (!a.wants[i]) continue;
      Values cases;
      for (size_t j = 1; j < a.in.size(); ++j) cases.push_back(i == j ? g : op::zeros_like(g));
      ct[i] = op::select_n(a.in[0], cases);
    }
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params&) { return select_n_aval(in); };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return Tensors{select_n_kernel(in, out)};
  };
  register_primitive(std::move(p));
}

// clamp(min, x, max) = min(max(x, min), max); the bounds may be scalars.
void clamp_primitive() {
  Primitive p;
  p.name = "clamp";
  p.sharding_rule = clamp_rule;
  p.local_plan = elementwise_like();
  p.elementwise = true;
  // As JAX: x gets g strictly inside (min, max); a bound gets it where it won.
  // Scalar bounds sum their cotangent.
  p.vjp = [](const VjpArgs& a) {
    const Value &g = *a.ct[0], &x = a.in[1];
    const Shape& shape = aval_of(x).shape;
    const Value lo = op::broadcast_in_dim(a.in[0], shape, {}), hi = op::broadcast_in_dim(a.in[2], shape, {});
    const Value zero = op::zeros_like(g);
    auto to_bound = [&](const Value& ct, const Value& bound) {
      return aval_of(bound).shape.empty() ? op::sum_to_operand(ct, {}, {}) : ct;
    };
    Cotangents ct(3);
    if (a.wants[0])
      ct[0] = to_bound(op::select(op::logical_and(op::gt(lo, x), op::lt(lo, hi)), g, zero), a.in[0]);
    if (a.wants[1])
      ct[1] = op::select(op::logical_and(op::gt(x, lo), op::lt(x, hi)), g, zero);
    if (a.wants[2]) ct[2] = to_bound(op::select(op::lt(hi, x), g, zero), a.in[2]);
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params&) {
    const Aval &lo = in[0], &x = in[1], &hi = in[2];
    check_same_dtypes("clamp", lo, x, hi);
    for (const auto& [bound, name] : {std::pair{&lo, "min"}, std::pair{&hi, "max"}}) {
      if (!bound->shape.empty() && bound->shape != x.shape)
        fail<TypeError>("clamp requires ", name, ".shape == operand.shape or ", name, ".shape == (), got ",
                        name, ".shape=", shape_str(bound->shape), ", operand.shape=", shape_str(x.shape), ".");
    }
    return Avals{like(x, x.shape, x.dtype, lo.weak_type && x.weak_type && hi.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals&) {
    const Tensor& x = in[1];
    const Tensor lo = in[0].broadcast_to(x.shape()), hi = in[2].broadcast_to(x.shape());
    return dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_ternary<T>(lo, x, hi, [](T l, T v, T h) { return min_op(max_op(v, l), h); })};
    });
  };
  register_primitive(std::move(p));
}

void convert_element_type_primitive() {
  Primitive p;
  p.name = "convert_element_type";
  p.elementwise = true;
  p.vjp = [](const VjpArgs& a) {
    const Aval& x = aval_of(a.in[0]);
    if (!is_floating(x.dtype)) return Cotangents(1);
    return Cotangents{op::cast_like(*a.ct[0], x)};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    return Avals{like(in[0], in[0].shape, params.get<DType>("new_dtype"),
                      params.get_or<bool>("weak_type", false))};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    if (in[0].dtype() == out[0].dtype) return Tensors{in[0]};  // only the weak type changes
    return dispatch_dtype(in[0].dtype(), [&](auto from) {
      using In = decltype(from);
      return dispatch_dtype(out[0].dtype, [&](auto to) {
        using Out = decltype(to);
        return Tensors{map_unary<In, Out>(in[0], out[0].dtype, [](In x) { return convert_op<Out, In>(x); })};
      });
    });
  };
  register_primitive(std::move(p));
}

// Reinterprets the bits. A narrower result gains a trailing dimension of the
// size ratio; a wider one consumes a trailing dimension of that size.
Shape bitcast_shape(const Aval& x, DType to) {
  const size_t from_size = itemsize(x.dtype), to_size = itemsize(to);
  if (x.dtype != to && (is_bool(x.dtype) || is_bool(to)))
    fail<TypeError>("lax.bitcast_convert_type does not support bool or complex values unless the operand "
                    "and destination types match. Got operand dtype=", dtype_name(x.dtype),
                    ", new_dtype=dtype('", dtype_name(to), "'). Consider using the arr.view() method instead.");
  Shape shape = x.shape;
  if (to_size < from_size) {
    shape.push_back(static_cast<int64_t>(from_size / to_size));
  } else if (to_size > from_size) {
    const int64_t last = shape.empty() ? 1 : shape.back();
    if (shape.empty() || last * from_size != to_size)
      fail<ValueError>("Attempting to convert array of shape ", shape_str(x.shape), " from ",
                       dtype_name(x.dtype), " of size ", from_size * kBitsPerByte, " bits to ", dtype_name(to),
                       " of size ", to_size * kBitsPerByte, ", bits but ", last, " * ", from_size * kBitsPerByte,
                       " != ", to_size * kBitsPerByte);
    shape.pop_back();
  }
  return shape;
}

void bitcast_convert_type_primitive() {
  Primitive p;
  p.name = "bitcast_convert_type";
  p.elementwise = true;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const DType to = params.get<DType>("new_dtype");
    return Avals{like(in[0], bitcast_shape(in[0], to), to)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    const Tensor packed = in[0].contiguous();  // a zero-copy view of its bytes
    return Tensors{Tensor::wrap(packed.raw(), out[0].dtype, out[0].shape, contiguous_strides(out[0].shape),
                                packed.storage())};
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_elementwise_primitives() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  unary<Accepts::Numeric>("neg", [](auto x) { return neg_op(x); },
                          d1([](auto& g, auto&, auto&) { return op::neg(g); }));
  unary<Accepts::SignedNumeric>("abs", [](auto x) { return abs_op(x); },
                                d1([](auto& g, auto& x, auto&) {
                                  return op::select(op::ge(x, c(x, 0.0)), g, op::neg(g));
                                }));
  unary<Accepts::Numeric>("sign", [](auto x) { return sign_op(x); }, zero_vjp);
  unary<Accepts::Numeric>("square", [](auto x) { return mul_op(x, x); },
                          d1([](auto& g, auto& x, auto&) { return op::mul(g, op::mul(c(x, 2.0), x)); }));
  unary<Accepts::Float>("floor", [](auto x) { return std::floor(x); }, zero_vjp);
  unary<Accepts::Float>("ceil", [](auto x) { return std::ceil(x); }, zero_vjp);
  // xsimd's exp overflows and loses the subnormal range slightly early: |x| >= 87 runs std::exp.
  unary_simd("exp", [](auto x) { return xsimd::exp(x); }, [](auto x) { return std::exp(x); }, 87.0,
             d1([](auto& g, auto&, auto& y) { return op::mul(g, y); }));
  unary<Accepts::Float>("exp2", [](auto x) { return std::exp2(x); },
                        d1([](auto& g, auto&, auto& y) { return op::mul(g, op::mul(y, c(y, kLn2))); }));
  unary_simd("log", [](auto x) { return xsimd::log(x); }, [](auto x) { return std::log(x); }, kInf,
             d1([](auto& g, auto& x, auto&) { return op::div(g, x); }));
  unary_simd("log1p", [](auto x) { return xsimd::log1p(x); }, [](auto x) { return std::log1p(x); }, kInf,
             d1([](auto& g, auto& x, auto&) { return op::div(g, op::add(x, c(x, 1.0))); }));
  unary_simd("expm1", [](auto x) { return xsimd::expm1(x); }, [](auto x) { return std::expm1(x); }, 87.0,
             d1([](auto& g, auto&, auto& y) { return op::mul(g, op::add(y, c(y, 1.0))); }));
  unary<Accepts::Float>("sqrt", [](auto x) { return std::sqrt(x); },
                        d1([](auto& g, auto&, auto& y) { return op::div(g, op::mul(c(y, 2.0), y)); }));
  unary<Accepts::Float>("rsqrt", [](auto x) { return decltype(x)(1) / std::sqrt(x); },
                        d1([](auto& g, auto& x, auto& y) {
                          return op::mul(g, op::mul(c(x, -0.5), op::div(y, x)));
                        }));
  unary<Accepts::Float>("cbrt", [](auto x) { return std::cbrt(x); },
                        d1([](auto& g, auto& x, auto& y) {
                          return op::mul(g, op::mul(c(x, 1.0 / 3.0), op::integer_pow(y, -2)));
                        }));
  unary_simd("tanh", [](auto x) { return xsimd::tanh(x); }, [](auto x) { return std::tanh(x); }, kInf,
             d1([](auto& g, auto&, auto& y) { return op::mul(g, op::sub(c(y, 1.0), op::square(y))); }));
  unary_simd("sin", [](auto x) { return xsimd::sin(x); }, [](auto x) { return std::sin(x); }, kInf,
             d1([](auto& g, auto& x, auto&) { return op::mul(g, op::cos(x)); }));
  unary_simd("cos", [](auto x) { return xsimd::cos(x); }, [](auto x) { return std::cos(x); }, kInf,
             d1([](auto& g, auto& x, auto&) { return op::neg(op::mul(g, op::sin(x))); }));
  unary<Accepts::Float>("tan", [](auto x) { return std::tan(x); },
                        d1([](auto& g, auto&, auto& y) { return op::mul(g, op::add(c(y, 1.0), op::square(y))); }));
  unary<Accepts::Float>("asin", [](auto x) { return std::asin(x); },
                        d1([](auto& g, auto& x, auto&) {
                          return op::mul(g, op::rsqrt(op::sub(c(x, 1.0), op::square(x))));
                        }));
  unary<Accepts::Float>("acos", [](auto x) { return std::acos(x); },
                        d1([](auto& g, auto& x, auto&) {
                          return op::neg(op::mul(g, op::rsqrt(op::sub(c(x, 1.0), op::square(x)))));
                        }));
  unary<Accepts::Float>("atan", [](auto x) { return std::atan(x); },
                        d1([](auto& g, auto& x, auto&) { return op::div(g, op::add(c(x, 1.0), op::square(x))); }));
  unary<Accepts::Float>("sinh", [](auto x) { return std::sinh(x); },
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, op::cosh(x)); }));
  unary<Accepts::Float>("cosh", [](auto x) { return std::cosh(x); },
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, op::sinh(x)); }));
  unary<Accepts::Float>("asinh", [](auto x) { return std::asinh(x); },
                        d1([](auto& g, auto& x, auto&) {
                          return op::mul(g, op::rsqrt(op::add(op::square(x), c(x, 1.0))));
                        }));
  unary<Accepts::Float>("acosh", [](auto x) { return std::acosh(x); },
                        d1([](auto& g, auto& x, auto&) {
                          return op::mul(g, op::rsqrt(op::mul(op::sub(x, c(x, 1.0)), op::add(x, c(x, 1.0)))));
                        }));
  unary<Accepts::Float>("atanh", [](auto x) { return std::atanh(x); },
                        d1([](auto& g, auto& x, auto&) { return op::div(g, op::sub(c(x, 1.0), op::square(x))); }));
  unary_simd(
      "logistic", [](auto x) { return decltype(x)(1) / (decltype(x)(1) + xsimd::exp(-x)); },
      [](auto x) { return logistic_op(x); }, 87.0,
      d1([](auto& g, auto&, auto& y) { return op::mul(g, op::mul(y, op::sub(c(y, 1.0), y))); }));
  unary<Accepts::Float>("erf", [](auto x) { return std::erf(x); },
                        d1([](auto& g, auto& x, auto&) {
                          return op::mul(g, op::mul(c(x, kTwoOverSqrtPi), op::exp(op::neg(op::square(x)))));
                        }));
  unary<Accepts::Float>("erfc", [](auto x) { return std::erfc(x); },
                        d1([](auto& g, auto& x, auto&) {
                          return op::mul(g, op::mul(c(x, -kTwoOverSqrtPi), op::exp(op::neg(op::square(x)))));
                        }));
  unary<Accepts::Float>("erf_inv", [](auto x) { return erf_inv_op(x); },
                        d1([](auto& g, auto&, auto& y) {
                          return op::mul(g, op::mul(c(y, 1.0 / kTwoOverSqrtPi), op::exp(op::square(y))));
                        }));
  unary<Accepts::Bitwise>("not", [](auto x) {
    if constexpr (std::is_same_v<decltype(x), bool>) return !x;
    else return ~x;
  });
  unary<Accepts::Integer>("population_count", [](auto x) { return population_count_op(x); });
  unary<Accepts::Integer>("clz", [](auto x) { return clz_op(x); });
  unary_predicate<Accepts::Float>("is_finite", [](auto x) { return std::isfinite(x); });
  round_primitive();
  integer_pow_primitive();

  auto pass = [](auto& g, auto&, auto&, auto&) { return g; };
  binary<Accepts::Numeric>("add", [](auto x, auto y) { return add_op(x, y); }, d2(pass, pass));
  // add_any: the sum of two cotangents (as JAX names it in jaxprs).
  binary<Accepts::Numeric>("add_any", [](auto x, auto y) { return add_op(x, y); }, d2(pass, pass));
  binary<Accepts::Numeric>("sub", [](auto x, auto y) { return sub_op(x, y); },
                           d2(pass, [](auto& g, auto&, auto&, auto&) { return op::neg(g); }));
  binary<Accepts::Numeric>("mul", [](auto x, auto y) { return mul_op(x, y); },
                           d2([](auto& g, auto&, auto& y, auto&) { return op::mul(g, y); },
                              [](auto& g, auto& x, auto&, auto&) { return op::mul(x, g); }));
  binary<Accepts::Numeric>("div", [](auto x, auto y) { return div_op(x, y); },
                           d2([](auto& g, auto&, auto& y, auto&) { return op::div(g, y); },
                              [](auto& g, auto& x, auto& y, auto&) {
                                return op::mul(op::mul(op::neg(g), x), op::integer_pow(y, -2));
                              }));
  binary<Accepts::Numeric>("rem", [](auto x, auto y) { return rem_op(x, y); },
                           d2(pass, [](auto& g, auto& x, auto& y, auto&) {
                             const Value q = op::div(x, y);
                             return op::mul(op::neg(g), op::mul(op::sign(q), op::floor(op::abs(q))));
                           }));
  binary<Accepts::Any>("max", [](auto x, auto y) { return max_op(x, y); },
                       d2([](auto& g, auto& x, auto& y, auto& z) { return op::mul(g, balanced_eq(x, z, y)); },
                          [](auto& g, auto& x, auto& y, auto& z) { return op::mul(g, balanced_eq(y, z, x)); }));
  binary<Accepts::Any>("min", [](auto x, auto y) { return min_op(x, y); },
                       d2([](auto& g, auto& x, auto& y, auto& z) { return op::mul(g, balanced_eq(x, z, y)); },
                          [](auto& g, auto& x, auto& y, auto& z) { return op::mul(g, balanced_eq(y, z, x)); }));
  binary<Accepts::Float>("atan2", [](auto x, auto y) { return std::atan2(x, y); },
                         d2([](auto& g, auto& x, auto& y, auto&) {
                              return op::mul(g, op::div(y, op::add(op::square(x), op::square(y))));
                            },
                            [](auto& g, auto& x, auto& y, auto&) {
                              return op::neg(op::mul(g, op::div(x, op::add(op::square(x), op::square(y)))));
                            }));
  binary<Accepts::Float>("nextafter", [](auto x, auto y) { return std::nextafter(x, y); });
  binary<Accepts::Bitwise>("and", [](auto x, auto y) { return x & y; });
  binary<Accepts::Bitwise>("or", [](auto x, auto y) { return x | y; });
  binary<Accepts::Bitwise>("xor", [](auto x, auto y) { return x ^ y; });
  binary<Accepts::Integer>("shift_left", [](auto x, auto y) { return shift_left_op(x, y); });
  binary<Accepts::Integer>("shift_right_logical", [](auto x, auto y) { return shift_right_logical_op(x, y); });
  binary<Accepts::Integer>("shift_right_arithmetic",
         [](auto x, auto y) { return shift_right_arithmetic_op(x, y); });
  pow_primitive();

  comparison("eq", [](auto x, auto y) { return x == y; });
  comparison("ne", [](auto x, auto y) { return x != y; });
  comparison("lt", [](auto x, auto y) { return x < y; });
  comparison("le", [](auto x, auto y) { return x <= y; });
  comparison("gt", [](auto x, auto y) { return x > y; });
  comparison("ge", [](auto x, auto y) { return x >= y; });

  select_n_primitive();
  clamp_primitive();
  convert_element_type_primitive();
  bitcast_convert_type_primitive();
}

}  // namespace meshsim
