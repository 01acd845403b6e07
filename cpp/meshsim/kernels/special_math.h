// The special functions behind lax's special-function primitives, one element
// in float32 or float64, as XLA's CPU backend computes them: the same steps in
// the same order, on XLA's own log, log1p and exp (xla_math.h) and the C
// library's sin, cos and pow, which XLA calls. Narrow floats are computed in
// float32, as XLA upcasts them.
#pragma once

namespace meshsim::special_math {

// log|Gamma(x)| by Lanczos' approximation (g = 7, nine coefficients), with
// Euler's reflection below 1/2; +inf at the poles and at +-inf.
template <class F> F lgamma(F x);
// The logarithmic derivative of Gamma, by the same series; NaN at the poles.
template <class F> F digamma(F x);
// The Hurwitz zeta function sum_k (k + q)^-x by Euler-Maclaurin summation.
template <class F> F zeta(F x, F q);
// The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x) for a natural
// number n > 0, digamma for n = 0, NaN for any other n.
template <class F> F polygamma(F n, F x);

// The regularized incomplete gamma functions P(a, x) (igamma) and Q(a, x) =
// 1 - P (igammac), and P's derivative in a (igamma_grad_a), by JAX's series
// below max(1, a) and continued fraction above, each element iterated until
// its last term changes the result by less than epsilon (the fraction for at
// most 2000 steps); NaN outside the domain.
template <class F> F igamma(F a, F x);
template <class F> F igammac(F a, F x);
template <class F> F igamma_grad_a(F a, F x);

// exp(-|x|) I0(x) and exp(-|x|) I1(x), the exponentially scaled modified
// Bessel functions of orders 0 and 1, by Cephes' Chebyshev expansions on
// |x| <= 8 and in 32 / |x| above.
template <class F> F bessel_i0e(F x);
template <class F> F bessel_i1e(F x);

}  // namespace meshsim::special_math
