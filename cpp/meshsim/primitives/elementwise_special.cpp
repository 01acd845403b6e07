// lax's special-function primitives: lgamma, digamma, polygamma, zeta, the
// incomplete gamma functions and the scaled Bessel functions i0e and i1e, elementwise on floats of one dtype (narrow
// floats computed in float32), with XLA's expansions as kernels
// (kernels/special_math.h) and JAX's derivatives: lgamma' = digamma,
// digamma' = polygamma(1, x), d/dx polygamma(m, x) = polygamma(m + 1, x),
// none in m; igamma's are igamma_grad_a in a and the Gamma(a) density in x
// (igammac's their negations); bessel_i0e' = bessel_i1e - sign(x) bessel_i0e
// and bessel_i1e' = bessel_i0e - bessel_i1e (sign(x) + 1 / x); zeta and
// igamma_grad_a have none.
#include <optional>

#include "meshsim/kernels/special_math.h"
#include "meshsim/primitives/elementwise_family.h"

namespace meshsim {
namespace {
using namespace elementwise;

Value digamma(const Value& x) { return op::bind1("digamma", {x}); }
Value polygamma(const Value& m, const Value& x) { return op::bind1("polygamma", {m, x}); }

Cotangents polygamma_vjp(const VjpArgs& a) {
  if (a.wants[0]) fail<ValueError>("polygamma gradient with respect to m is not supported");
  const Value &g = *a.ct[0], &m = a.in[0], &x = a.in[1];
  Cotangents ct(2);
  if (a.wants[1]) ct[1] = unbroadcast(op::mul(g, polygamma(op::add(m, lit(m, 1.0)), x)), x);
  return ct;
}

// Both coefficients are computed, a's first, before the cotangents, x's
// first: the order in which JAX linearizes and then transposes the rule.
Cotangents igamma_vjp(const VjpArgs& args, bool complement) {
  const Value &g = *args.ct[0], &a = args.in[0], &x = args.in[1];
  std::optional<Value> da, dx;
  if (args.wants[0]) da = op::bind1("igamma_grad_a", {a, x});
  if (args.wants[1]) {
    // Bound one statement at a time: JAX's order of equations.
    const Value minus_x = op::neg(x);
    const Value a_minus_one = op::sub(a, lit(a, 1.0));
    const Value log_x = op::log(x);
    const Value log_density = op::add(minus_x, op::mul(a_minus_one, log_x));
    const Value log_gamma_a = op::bind1("lgamma", {a});
    dx = op::exp(op::sub(log_density, log_gamma_a));
  }
  auto scaled = [&](const Value& d) { return op::mul(complement ? op::neg(g) : g, d); };
  Cotangents ct(2);
  if (dx) ct[1] = unbroadcast(scaled(*dx), x);
  if (da) ct[0] = unbroadcast(scaled(*da), a);
  return ct;
}

// i0e' = i1e - sign(x) i0e.
Value bessel_i0e_derivative(const Value& x, const Value& y) {
  const Value i1e = op::bind1("bessel_i1e", {x});
  const Value sign_x = op::sign(x);
  return op::sub(i1e, op::mul(sign_x, y));
}

// A float dtype's machine epsilon, 2^-(mantissa bits) (numpy's finfo(dtype).eps).
double epsilon(DType dt) {
  switch (dt) {
    case DType::Float64: return 0x1p-52;
    case DType::Float32: return 0x1p-23;
    case DType::Float16: return 0x1p-10;
    case DType::BFloat16: return 0x1p-7;
    case DType::Float8E3M4: return 0x1p-4;
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ: return 0x1p-2;
    default: return 0x1p-3;  // the E4M3 formats
  }
}

// i1e' = i0e - i1e (sign(x) + 1 / x), 1/2 where |x| is at most epsilon (taken
// at epsilon, so that the unselected branch stays finite). JAX compares |x|
// with epsilon as an array of x's dtype: a weakly typed |x| is made strong.
Value bessel_i1e_derivative(const Value& x, const Value& y) {
  const Aval& aval = aval_of(x);
  const double eps = epsilon(aval.dtype);
  Value abs_x = op::abs(x);
  if (aval.weak_type) abs_x = op::convert(abs_x, aval.dtype);
  const Value not_tiny = op::gt(abs_x, lit(x, eps));
  const Value eps_like_x = c(x, eps);
  const Value safe_x = op::select(not_tiny, x, eps_like_x);
  const Value i0e = op::bind1("bessel_i0e", {safe_x});
  const Value sign_x = op::sign(safe_x);
  const Value reciprocal = op::integer_pow(safe_x, -1);
  const Value d = op::sub(i0e, op::mul(y, op::add(sign_x, reciprocal)));
  const Value half = c(x, 0.5);
  return op::select(not_tiny, d, half);
}

}  // namespace

void elementwise::register_special_elementwise_primitives() {
  unary<Accepts::Float>("lgamma", [](auto x) { return special_math::lgamma(x); },
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, digamma(x)); }));
  unary<Accepts::Float>("digamma", [](auto x) { return special_math::digamma(x); },
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, polygamma(lit(x, 1.0), x)); }));
  binary<Accepts::Float>("polygamma", [](auto m, auto x) { return special_math::polygamma(m, x); }, polygamma_vjp);
  binary<Accepts::Float>("zeta", [](auto x, auto q) { return special_math::zeta(x, q); });
  binary<Accepts::Float>("igamma", [](auto a, auto x) { return special_math::igamma(a, x); },
                         [](const VjpArgs& args) { return igamma_vjp(args, false); });
  binary<Accepts::Float>("igammac", [](auto a, auto x) { return special_math::igammac(a, x); },
                         [](const VjpArgs& args) { return igamma_vjp(args, true); });
  binary<Accepts::Float>("igamma_grad_a", [](auto a, auto x) { return special_math::igamma_grad_a(a, x); });
  unary<Accepts::Float>("bessel_i0e", [](auto x) { return special_math::bessel_i0e(x); },
                        d1([](auto& g, auto& x, auto& y) { return op::mul(g, bessel_i0e_derivative(x, y)); }));
  unary<Accepts::Float>("bessel_i1e", [](auto x) { return special_math::bessel_i1e(x); },
                        d1([](auto& g, auto& x, auto& y) { return op::mul(g, bessel_i1e_derivative(x, y)); }));
}

}  // namespace meshsim
