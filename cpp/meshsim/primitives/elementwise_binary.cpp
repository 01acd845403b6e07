// Binary arithmetic and comparisons, with XLA's semantics on CPU. Either
// operand may be a scalar (`mul a 2.0:f32[]`, as JAX 0.10 writes it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "meshsim/kernels/scalar_math.h"
#include "meshsim/primitives/elementwise_family.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {
using namespace elementwise;

// nextafter steps by one unit of the operands' own format, so narrow floats
// move along their bit patterns rather than float32's.
template <class T>
T nextafter_bits(T x, T y) {
  const float fx = float(x), fy = float(y);
  if (std::isnan(fx) || std::isnan(fy)) return T(std::nanf(""));
  if (fx == fy) return y;
  T r;
  if (fx == 0) {
    r.bits = 1;  // the smallest subnormal, signed as y
    return fy < 0 ? T(-float(r)) : r;
  }
  r.bits = (fx < fy) == (fx > 0) ? x.bits + 1 : x.bits - 1;
  return r;
}

void nextafter_primitive() {
  Primitive p;
  p.name = "nextafter";
  p.elementwise = true;
  p.abstract_eval = [](const Avals& in, const Params&) {
    return Avals{binary_aval("nextafter", Accepts::Float, in, in[0].dtype)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_float(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return as_tensors(map_binary<T, T>(in[0], in[1], out[0].dtype, [](T x, T y) {
        if constexpr (is_small_float_v<T>) return nextafter_bits(x, y);
        else return std::nextafter(x, y);
      }));
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
    check_dtype("pow", Accepts::Inexact, x.dtype, 0);
    check_dtype("pow", Accepts::Number, y.dtype, 1);
    if (!is_integer(y.dtype)) check_same_dtypes("pow", x, y);
    check_same_shapes("pow", x, y);
    return Avals{like(x, x.shape, x.dtype, x.weak_type && y.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_inexact(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      Tensor y = in[1];
      if (y.dtype() != out[0].dtype) {
        y = dispatch_integer(y.dtype(), [&](auto itag) {
          using I = decltype(itag);
          return map_unary<I, T>(in[1], out[0].dtype, [](I v) { return static_cast<T>(static_cast<compute_type_t<T>>(v)); });
        });
      }
      return as_tensors(map_binary<T, T>(in[0], y, out[0].dtype, [](T a, T b) { return T(pow_op(compute_type_t<T>(a), compute_type_t<T>(b))); }));
    });
  };
  register_primitive(std::move(p));
}


// A divisor XLA sees as a broadcast: a scalar beside a larger dividend, or a
// view that repeats its elements along a dimension (stride 0, size > 1), as
// broadcast_in_dim leaves it. A size-1 expansion is not one: XLA turns it into
// a reshape.
bool is_broadcast_divisor(const Tensor& x, const Tensor& y) {
  if (y.ndim() == 0) return x.ndim() > 0;
  for (int64_t d = 0; d < y.ndim(); ++d)
    if (y.strides()[d] == 0 && y.shape()[d] > 1) return true;
  return false;
}

// XLA on CPU compiles x / broadcast(y) as x * broadcast(1 / y) for float32,
// float64, float16 and bfloat16, so such quotients differ from x / y in the last
// bit. The reciprocal is rounded to the element type, except bfloat16's, which
// stays in float32 (XLA's CPU compiler drops the round trip); a float32 or
// float64 subnormal reciprocal is flushed to zero, as XLA's code runs. float8 and complex
// quotients by a broadcast divide.
bool divides_by_reciprocal(DType dt) {
  return dt == DType::Float32 || dt == DType::Float64 || dt == DType::Float16 || dt == DType::BFloat16;
}

Tensor divide_by_broadcast(const Tensor& x, const Tensor& y, DType out_dtype) {
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_type_t<T>;
    return map_binary<T, T>(x, y, out_dtype, [](T a, T b) {
      C reciprocal = div_op(C(1), to_compute(b));
      if constexpr (std::is_same_v<T, float16>) reciprocal = to_compute(from_compute<T>(reciprocal));
      else reciprocal = flush_subnormal(reciprocal);  // XLA's code runs with denormals flushed
      return from_compute<T>(static_cast<C>(mul_op(to_compute(a), reciprocal)));
    });
  });
}

void div_primitive() {
  Primitive p = binary_primitive<Accepts::Number>(
      "div", [](auto x, auto y) { return div_op(x, y); },
      d2([](auto& g, auto&, auto& y, auto&) { return op::div(g, y); },
         [](auto& g, auto& x, auto& y, auto&) { return op::neg(op::mul(op::mul(g, op::integer_pow(y, -2)), x)); }));
  p.kernel = [quotient = p.kernel](const Tensors& in, const Params& params, const Avals& out) {
    if (divides_by_reciprocal(in[0].dtype()) && is_broadcast_divisor(in[0], in[1]))
      return Tensors{divide_by_broadcast(in[0], in[1], out[0].dtype)};
    return quotient(in, params, out);
  };
  register_primitive(std::move(p));
}

}  // namespace

void elementwise::register_binary_elementwise_primitives() {
  auto pass = [](auto& g, auto&, auto&, auto&) { return g; };
  binary<Accepts::Number>("add", [](auto x, auto y) { return add_op(x, y); }, d2(pass, pass), add_ur_rule);
  // add_any: the sum of two cotangents (as JAX names it in jaxprs).
  binary<Accepts::Number>("add_any", [](auto x, auto y) { return add_op(x, y); }, d2(pass, pass),
                          add_ur_rule);
  binary<Accepts::Number>("sub", [](auto x, auto y) { return sub_op(x, y); },
                           d2(pass, [](auto& g, auto&, auto&, auto&) { return op::neg(g); }));
  binary<Accepts::Number>("mul", [](auto x, auto y) { return mul_op(x, y); },
                           d2([](auto& g, auto&, auto& y, auto&) { return op::mul(g, y); },
                              [](auto& g, auto& x, auto&, auto&) { return op::mul(x, g); }),
                           mul_ur_rule);
  div_primitive();
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
  nextafter_primitive();
  pow_primitive();

  comparison<true>("eq", [](auto x, auto y) { return x == y; });
  comparison<true>("ne", [](auto x, auto y) { return x != y; });
  comparison<false>("lt", [](auto x, auto y) { return x < y; });
  comparison<false>("le", [](auto x, auto y) { return x <= y; });
  comparison<false>("gt", [](auto x, auto y) { return x > y; });
  comparison<false>("ge", [](auto x, auto y) { return x >= y; });
}

}  // namespace meshsim
