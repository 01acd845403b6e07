// lax's special-function primitives: lgamma, digamma, polygamma and zeta,
// elementwise on floats of one dtype (narrow floats computed in float32), with
// XLA's expansions as kernels (kernels/special_math.h) and JAX's derivatives:
// lgamma' = digamma, digamma' = polygamma(1, x), d/dx polygamma(m, x) =
// polygamma(m + 1, x); none in m, and zeta has none.
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

}  // namespace

void elementwise::register_special_elementwise_primitives() {
  unary<Accepts::Float>("lgamma", [](auto x) { return special_math::lgamma(x); },
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, digamma(x)); }));
  unary<Accepts::Float>("digamma", [](auto x) { return special_math::digamma(x); },
                        d1([](auto& g, auto& x, auto&) { return op::mul(g, polygamma(lit(x, 1.0), x)); }));
  binary<Accepts::Float>("polygamma", [](auto m, auto x) { return special_math::polygamma(m, x); }, polygamma_vjp);
  binary<Accepts::Float>("zeta", [](auto x, auto q) { return special_math::zeta(x, q); });
}

}  // namespace meshsim
