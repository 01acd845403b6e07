// Binary arithmetic (add, sub, mul, div, rem), with XLA's semantics on CPU. Either
// operand may be a scalar (`mul a 2.0:f32[]`, as JAX 0.10 writes it). The other
// binary families are units of their own (elementwise_binary.h), so editing one op
// recompiles a few ops, not all of them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "meshsim/kernels/fused_multiply_add.h"
#include "meshsim/kernels/scalar_math.h"
#include "meshsim/primitives/elementwise_binary.h"
#include "meshsim/primitives/elementwise_family.h"
#include "meshsim/ir/kernel_results.h"
#include "meshsim/runtime/xla_rewrites.h"

namespace meshsim {
namespace {
using namespace elementwise;

// A divisor XLA sees as a broadcast: a scalar beside a larger dividend, a
// size-1 dim beside a larger one (the op's implicit broadcast, lowered to an
// explicit one), or a view that repeats its elements along a dimension
// (stride 0, size > 1), as broadcast_in_dim leaves it. A size-1 expansion
// by broadcast_in_dim is not one: XLA turns it into a reshape.
bool is_broadcast_divisor(const Tensor& x, const Tensor& y) {
  if (y.ndim() == 0) return x.ndim() > 0;
  for (int64_t d = 0; d < y.ndim(); ++d)
    if ((y.strides()[d] == 0 && y.shape()[d] > 1) || (x.ndim() == y.ndim() && y.shape()[d] == 1 && x.shape()[d] > 1))
      return true;
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

// 1 / c element by element, as XLA folds it (std::complex division).
Tensor reciprocal_of(const Tensor& c) {
  const Tensor dense = c.contiguous();
  Tensor out = Tensor::empty(c.dtype(), c.shape());
  dispatch_complex(c.dtype(), [&](auto tag) {
    using C = decltype(tag);
    const C* from = dense.data<C>();
    C* to = out.data<C>();
    for (int64_t i = 0; i < c.size(); ++i) to[i] = C(1) / from[i];
  });
  return out;
}

// XLA's algebraic simplifier turns a complex quotient by a constant into a
// product with the constant's reciprocal (A / const => A * (1 / const)); a
// divisor passed in at run time divides.
bool multiplies_by_constant_reciprocal(const XlaRewriteSite& site) {
  const Equation& e = site.eqn;
  if (e.inputs.size() != 2 || !is_complex(site.traced.avals[e.outputs[0]].dtype)) return false;
  const int c = const_index(site.traced, e.inputs[1]);
  if (c < 0) return false;
  if (!site.compiled) return true;
  Program& p = *site.compiled;
  const int r = p.new_var(site.traced.avals[e.inputs[1]]);
  p.constvars.push_back(r);
  p.consts.push_back(reciprocal_of(site.traced.consts[c]));
  p.eqns.push_back(Equation{&primitive("mul"), e.params, {e.inputs[0], r}, e.outputs});
  return true;
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
  p.float_tile.dense_only = true;  // a stride-0 divisor divides by its reciprocal
  p.xla_rewrite = multiplies_by_constant_reciprocal;
  register_primitive(std::move(p));
}

// A complex product's imaginary part is one fused multiply-add; which of its
// two products XLA's code rounds first depends on the operands. Between two
// arrays it is fma(x.im, y.re, x.re * y.im) (mul_op); when y is a broadcast
// (a scalar beside a larger operand, or a stride-0 view) the product with
// y's real part is rounded: fma(x.re, y.im, x.im * y.re), on either side.
Tensor multiply_by_broadcast(const Tensor& x, const Tensor& y, DType out_dtype) {
  return dispatch_complex(x.dtype(), [&](auto tag) {
    using C = decltype(tag);
    return map_binary<C, C>(x, y, out_dtype, [](C x_in, C y_in) {
      const C u = flush_subnormal(x_in), v = flush_subnormal(y_in);
      return flush_subnormal(C(std::fma(u.real(), v.real(), -(u.imag() * v.imag())),
                               std::fma(u.real(), v.imag(), u.imag() * v.real())));
    });
  });
}

void mul_primitive() {
  Primitive p = binary_primitive<Accepts::Number>(
      "mul", [](auto x, auto y) { return mul_op(x, y); },
      d2([](auto& g, auto&, auto& y, auto&) { return op::mul(g, y); },
         [](auto& g, auto& x, auto&, auto&) { return op::mul(x, g); }),
      mul_ur_rule);
  p.commutative = true;
  p.fma_product = [](const Params&) { return true; };
  p.kernel = [product = p.kernel](const Tensors& in, const Params& params, const Avals& out) {
    if (is_complex(in[0].dtype())) {
      if (is_broadcast_divisor(in[0], in[1]))
        return Tensors{multiply_by_broadcast(in[0], in[1], out[0].dtype)};
      if (is_broadcast_divisor(in[1], in[0]))
        return Tensors{multiply_by_broadcast(in[1], in[0], out[0].dtype)};
    }
    return product(in, params, out);
  };
  register_primitive(std::move(p));
}


// fused_multiply_add(a, b, c) = a * b + c rounded once. No program is traced
// with it: the jit path puts it where XLA's CPU code contracts a product and
// the sum reading it (runtime/xla_rewrites.h). Any operand may be a scalar.
void fused_multiply_add_primitive() {
  Primitive p;
  p.name = "fused_multiply_add";
  p.operands = exactly(3);
  p.elementwise = true;
  p.vjp = [](const VjpArgs& a) {
    const Value& g = *a.ct[0];
    Cotangents ct(3);
    if (a.wants[0]) ct[0] = unbroadcast(op::mul(g, a.in[1]), a.in[0]);
    if (a.wants[1]) ct[1] = unbroadcast(op::mul(a.in[0], g), a.in[1]);
    if (a.wants[2]) ct[2] = unbroadcast(g, a.in[2]);
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params&) {
    const std::string name = "fused_multiply_add";
    for (int i = 0; i < 3; ++i) check_dtype(name, Accepts::Float, in[i].dtype, i);
    check_same_dtypes(name, in[0], in[1], in[2]);
    const Aval* shaped = &in[0];
    for (const Aval& x : in)
      if (x.ndim() > 0) shaped = &x;
    Aval out = like(*shaped, shaped->shape, shaped->dtype, in[0].weak_type && in[1].weak_type && in[2].weak_type);
    for (const Aval& x : in) {
      Aval sized = out;
      out.shape = broadcast_operand_shapes(name, sized, x);
    }
    return Avals{out};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return Tensors{fused_multiply_add(in[0], in[1], in[2], out[0].shape)};
  };
  // A scalar operand beside a shaped one reads as a tile of its copies, as the kernel reads it.
  p.float_tile = {3, [](const float* const* in, float* out, int64_t n) {
    fused_multiply_add_row(in[0], in[1], in[2], out, n);
  }};
  register_primitive(std::move(p));
}

}  // namespace

// JAX transposes a sum or difference in one rule, x's cotangent first (d2
// computes y's first, as JAX's two-term rules do).
VjpRule x_cotangent_first(VjpRule rule) {
  return [rule](const VjpArgs& a) {
    const std::vector<bool> only_x{a.wants[0], false}, only_y{false, a.wants[1]};
    Cotangents ct = rule(VjpArgs{a.in, a.out, a.ct, a.params, only_x});
    ct[1] = rule(VjpArgs{a.in, a.out, a.ct, a.params, only_y})[1];
    return ct;
  };
}

void elementwise::register_binary_elementwise_primitives() {
  using namespace elementwise;
  auto pass = [](auto& g, auto&, auto&, auto&) { return g; };
  auto sum = [](Primitive p, int sign) {
    p.fma_sum = sign;
    p.commutative = sign > 0;
    register_primitive(std::move(p));
  };
  sum(binary_primitive<Accepts::Number>("add", [](auto x, auto y) { return add_op(x, y); },
                                        x_cotangent_first(d2(pass, pass)), add_ur_rule), +1);
  // add_any: the sum of two cotangents (as JAX names it in jaxprs).
  sum(binary_primitive<Accepts::Number>("add_any", [](auto x, auto y) { return add_op(x, y); },
                                        x_cotangent_first(d2(pass, pass)), add_ur_rule), +1);
  sum(binary_primitive<Accepts::Number>("sub", [](auto x, auto y) { return sub_op(x, y); },
                                        x_cotangent_first(d2(pass, [](auto& g, auto&, auto&, auto&) { return op::neg(g); }))), -1);
  mul_primitive();
  fused_multiply_add_primitive();
  div_primitive();
  binary<Accepts::Numeric>("rem", [](auto x, auto y) { return rem_op(x, y); },
                           d2(pass, [](auto& g, auto& x, auto& y, auto&) {
                             const Value q = op::div(x, y);
                             return op::mul(op::neg(g), op::mul(op::sign(q), op::floor(op::abs(q))));
                           }));
  register_binary_math_primitives();
  register_comparison_primitives();
}

}  // namespace meshsim
