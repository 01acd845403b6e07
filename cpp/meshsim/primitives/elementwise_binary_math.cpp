// Binary max, min, atan2, nextafter and pow, with XLA's semantics on CPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "meshsim/kernels/scalar_math.h"
#include "meshsim/primitives/elementwise_binary.h"
#include "meshsim/primitives/elementwise_family.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {
using namespace elementwise;
// nextafter steps by one unit of the operands' own format, so narrow floats
// move along their bit patterns rather than float32's. As XLA's (and libm's
// for float32/float64): x == y is a float comparison, where a subnormal
// equals zero (core/denormals.h); the zero test and the direction read the
// bits, where it does not.
template <class T>
T nextafter_bits(T x, T y) {
  using Bits = decltype(x.bits);
  constexpr Bits kSign = Bits(1) << (8 * sizeof(Bits) - 1);
  const float fx = float(x), fy = float(y);
  if (std::isnan(fx) || std::isnan(fy)) return T(std::nanf(""));
  if (fx == fy) return y;
  const Bits x_mag = x.bits & Bits(~kSign), y_mag = y.bits & Bits(~kSign);
  T r;
  if (x_mag == 0) {
    r.bits = 1;  // the smallest subnormal, signed as y
    return std::signbit(fy) ? T(-float(r)) : r;
  }
  const bool toward_zero = x_mag > y_mag || ((x.bits ^ y.bits) & kSign);
  r.bits = toward_zero ? Bits(x.bits - 1) : Bits(x.bits + 1);
  return r;
}

void nextafter_primitive() {
  Primitive p;
  p.name = "nextafter";
  p.operands = exactly(2);
  p.elementwise = true;
  p.bf16_widened_once = false;  // works on the bits
  p.batch = batch_broadcasting;
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
  p.operands = exactly(2);
  p.elementwise = true;
  // An integer exponent is not differentiable; at y == 0 the base's cotangent is 0.
  p.vjp = [](const VjpArgs& a) {
    const Value &g = *a.ct[0], &x = a.in[0], &z = a.out[0];
    const bool int_exponent = is_integer(aval_of(a.in[1]).dtype);
    const Value y = int_exponent ? op::convert(a.in[1], aval_of(x).dtype) : a.in[1];
    Cotangents ct(2);
    if (a.wants[0]) {
      Value jac = op::mul(y, op::pow(x, op::sub(y, lit(y, 1.0))));
      if (int_exponent) jac = op::select(op::eq(y, c(y, 0.0)), c(y, 0.0), jac);
      ct[0] = unbroadcast(op::mul(g, jac), x);
    }
    if (a.wants[1] && !int_exponent) ct[1] = unbroadcast(op::mul(g, op::mul(op::log(replace_zero(x)), z)), a.in[1]);
    return ct;
  };
  p.batch = batch_broadcasting;
  p.abstract_eval = [](const Avals& in, const Params&) {
    const Aval &x = in[0], &y = in[1];
    check_dtype("pow", Accepts::Inexact, x.dtype, 0);
    check_dtype("pow", Accepts::Number, y.dtype, 1);
    if (!is_integer(y.dtype) && y.dtype != x.dtype)
      fail<TypeError>("the first argument to pow must have an inexact dtype (float or complex), and the second "
                      "argument must have an inexact or integer dtype, and two inexact dtypes must match, but got ",
                      dtype_name(x.dtype), " and ", dtype_name(y.dtype), " respectively.");
    const Aval& shaped = x.ndim() == 0 ? y : x;
    return Avals{like(shaped, broadcast_operand_shapes("pow", x, y), x.dtype, x.weak_type && y.weak_type)};
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


}  // namespace

void elementwise::register_binary_math_primitives() {
  auto balanced = d2([](auto& g, auto& x, auto& y, auto& z) { return op::mul(g, balanced_eq(x, z, y)); },
                     [](auto& g, auto& x, auto& y, auto& z) { return op::mul(g, balanced_eq(y, z, x)); });
  register_primitive(commuting(binary_primitive<Accepts::Any>("max", [](auto x, auto y) { return max_op(x, y); },
                                                              balanced)));
  register_primitive(commuting(binary_primitive<Accepts::Any>("min", [](auto x, auto y) { return min_op(x, y); },
                                                              balanced)));
  binary<Accepts::Float>("atan2", [](auto x, auto y) { return std::atan2(x, y); },
                         d2([](auto& g, auto& x, auto& y, auto&) {
                              return op::mul(g, op::div(y, op::add(op::square(x), op::square(y))));
                            },
                            [](auto& g, auto& x, auto& y, auto&) {
                              return op::neg(op::mul(g, op::div(x, op::add(op::square(x), op::square(y)))));
                            }));
  nextafter_primitive();
  pow_primitive();

}

}  // namespace meshsim
