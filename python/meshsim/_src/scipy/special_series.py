"""The special functions of `jax.scipy.special` (and their `jax.lax` forms) that are defined by
series, continued fractions and rational approximations, composed from meshsim's operations:

- incomplete beta I_x(a, b) (continued fraction on the side where it converges fast), and the
  fixed-length incomplete gamma series and fraction random_gamma_grad differentiates;
- Hurwitz zeta's derivatives, through Euler-Maclaurin summation (ten terms, then eight Bernoulli
  corrections);
- exponential integrals E_n, E_1 and Ei (series for small arguments, continued fraction above);
- erfcx (exp(x^2) erfc(x), a continued fraction where erfc underflows), poch, bernoulli.

Loops run as `fori_loop`s of fixed length, so every function traces to a small program and
works under jit, vmap and grad."""
from __future__ import annotations

import math

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src.lax import namespace as lax
from meshsim._src.ad import custom_jvp, jvp as ad_jvp
from meshsim._src.numpy.promotion import promote_args_inexact
from meshsim._src.scipy.special import _float, digamma, gammaln, gammasgn

__all__ = ["gammainc", "gammaincc", "betainc", "zeta", "polygamma", "expn", "exp1", "expi",
           "i0e", "i0", "i1e", "i1", "erfcx", "poch", "bernoulli"]

_EULER = 0.5772156649015329
_TINY = 1e-30
_EPS = 1e-7


def _fori(n: int, body, init):
    return lax.fori_loop(0, n, body, init)


def _lentz_step(f, c, d, an, bn):
    """One step of Lentz's method for the continued fraction b0 + a1/(b1 + a2/(b2 + ...))."""
    d = bn + an * d
    d = jnp.where(jnp.abs(d) < _TINY, _TINY, d)
    c = bn + an / c
    c = jnp.where(jnp.abs(c) < _TINY, _TINY, c)
    d = 1.0 / d
    return f * c * d, c, d


# --- incomplete gamma -----------------------------------------------------------
# P(a, x) and Q(a, x) are lax's igamma and igammac primitives. random_gamma_grad (lax/special.py)
# differentiates these fixed-length forms (200 series terms, 200 fraction steps) in a.

def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    a, x = promote_args_inexact(a, x, keep_scalars=True)
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    a, x = promote_args_inexact(a, x, keep_scalars=True)
    return lax.igammac(a, x)


def _gamma_series_sum(a, x):
    """P(a, x) / (x^a e^-x / Gamma(a)): sum over n of x^n / (a (a + 1) ... (a + n))."""
    def body(i, state):
        total, term, ap = state
        ap = ap + 1.0
        term = term * x / ap
        return total + term, term, ap
    start = 1.0 / a
    total, _, _ = _fori(200, body, (start, start, a))
    return total


def _gamma_fraction_value(a, x):
    """Q(a, x) / (x^a e^-x / Gamma(a)), Lentz's evaluation of the continued fraction."""
    b = x + 1.0 - a
    c = jnp.full_like(x, 1.0 / _TINY)
    d = 1.0 / jnp.where(jnp.abs(b) < _TINY, _TINY, b)

    def body(i, state):
        f, c, d, b = state
        n = (i + 1).astype(x.dtype)
        b = b + 2.0
        return (*_lentz_step(f, c, d, -n * (n - a), b), b)
    f, _, _, _ = _fori(200, body, (d, c, d, b))
    return f


# --- incomplete beta ----------------------------------------------------------------

def _beta_fraction(a, b, x):
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = jnp.ones_like(x)
    d = 1.0 - qab * x / qap
    d = 1.0 / jnp.where(jnp.abs(d) < _TINY, _TINY, d)

    def body(i, state):
        h, c, d = state
        m = (i + 1).astype(x.dtype)
        m2 = 2.0 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        h, c, d = _lentz_step(h, c, d, even, 1.0)
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        return _lentz_step(h, c, d, odd, 1.0)
    h, _, _ = _fori(200, body, (d, c, d))
    return h


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    a, b, x = _float(a, b, x)
    a, b, x = jnp.broadcast_arrays(a, b, x)
    inside = (x > 0) & (x < 1)
    xs = jnp.where(inside, x, 0.5)
    log_front = gammaln(a + b) - gammaln(a) - gammaln(b) + a * jnp.log(xs) + b * jnp.log1p(-xs)
    front = jnp.exp(log_front)
    direct = xs < (a + 1.0) / (a + b + 2.0)
    xd = jnp.where(direct, xs, 1.0 - xs)
    ad, bd = jnp.where(direct, a, b), jnp.where(direct, b, a)
    frac = _beta_fraction(ad, bd, xd)
    out = jnp.where(direct, front * frac / a, 1.0 - front * frac / b)
    out = jnp.where(x <= 0, 0.0, jnp.where(x >= 1, 1.0, out))
    return jnp.where((a <= 0) | (b <= 0) | (x < 0) | (x > 1) | jnp.isnan(x), jnp.nan, out)


# --- zeta and polygamma ---------------------------------------------------------------

# B_2k / (2k)! for k = 1..8
_BERNOULLI_OVER_FACTORIAL = [1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160,
                             -691 / 1307674368000, 1 / 74724249600, -3617 / 10670622842880000]


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)^-x: lax's zeta primitive, differentiated through
    a series (the primitive has no derivative). Riemann's (q=None) is not implemented, as in JAX."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to compute the "
                                  "Hurwitz Zeta function.")
    return _hurwitz_zeta(x, q)


def _hurwitz_zeta_primitive(x, q):
    x, q = promote_args_inexact(x, q, keep_scalars=True)
    return lax.zeta(x, q)


_hurwitz_zeta_primitive.__name__ = "zeta"  # the name its custom_jvp_call equation prints, as JAX's
_hurwitz_zeta = custom_jvp(_hurwitz_zeta_primitive)


@_hurwitz_zeta.defjvp
def jvp(primals, tangents):  # printed by name in the equation, as JAX's rule is
    primals = promote_args_inexact(*primals, keep_scalars=True)
    # An integer operand's tangent is a float0 zero (or, traced ahead, of its own dtype).
    tangents = [jnp.zeros_like(p) if np.dtype(t.dtype).kind in "Vbiu" else lax.convert_element_type(t, p.dtype)
                for p, t in zip(primals, tangents)]
    return ad_jvp(_zeta_series, tuple(primals), tuple(tangents))


def _zeta_series(x, q):
    """The Hurwitz zeta function sum_k (k + q)^-x as a differentiable composition (ten terms, then
    eight Euler-Maclaurin corrections): what zeta's derivatives differentiate."""
    x, q = _float(x, q)
    x, q = jnp.broadcast_arrays(x, q)
    n = 10
    total = jnp.zeros_like(x)
    for k in range(n):
        total = total + (q + k) ** -x
    w = q + n
    total = total + w ** (1.0 - x) / (x - 1.0) + 0.5 * w ** -x
    rising = x  # x (x+1) ... (x + 2j - 2)
    power = w ** (-x - 1.0)
    for j, coef in enumerate(_BERNOULLI_OVER_FACTORIAL):
        total = total + coef * rising * power
        rising = rising * (x + 2 * j + 1) * (x + 2 * j + 2)
        power = power / (w * w)
    total = jnp.where(x == 1, jnp.inf, total)
    bad = (x < 1) | ((q <= 0) & (q == jnp.floor(q)))
    return jnp.where(bad, jnp.nan, total)


def polygamma(n, x):
    """The n-th derivative of the digamma function (n a non-negative integer array)."""
    n = jnp.asarray(n)
    if not jnp.issubdtype(n.dtype, jnp.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype {n.dtype}.")
    n, x = promote_args_inexact(n, x, keep_scalars=True)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError("polygamma does not support complex-valued inputs.")
    return lax.polygamma(n, x)


# --- exponential integrals ---------------------------------------------------------

def expn(n, x):
    """The generalized exponential integral E_n(x) = int_1^inf exp(-x t) / t^n dt."""
    n, x = jnp.asarray(n), _float(x)[0]
    nf = n.astype(x.dtype)
    nf, x = jnp.broadcast_arrays(nf, x)
    nm1 = nf - 1.0
    # x > 1: continued fraction.
    xc = jnp.where(x > 1, x, 2.0)
    b = xc + nf
    c = jnp.full_like(xc, 1.0 / _TINY)
    d = 1.0 / b

    def cf_body(i, state):
        h, c, d, b = state
        k = (i + 1).astype(x.dtype)
        b = b + 2.0
        return (*_lentz_step(h, c, d, -k * (nm1 + k), b), b)
    h, _, _, _ = _fori(100, cf_body, (d, c, d, b))
    fraction = h * jnp.exp(-xc)
    # 0 < x <= 1: series.
    xs = jnp.where((x > 0) & (x <= 1), x, 0.5)
    start = jnp.where(nm1 != 0, 1.0 / jnp.where(nm1 != 0, nm1, 1.0), -jnp.log(xs) - _EULER)
    psi = digamma(jnp.maximum(nf, 1.0))

    def series_body(i, state):
        total, fact = state
        k = (i + 1).astype(x.dtype)
        fact = fact * (-xs / k)
        term = jnp.where(k != nm1, -fact / jnp.where(k != nm1, k - nm1, 1.0), fact * (-jnp.log(xs) + psi))
        return total + term, fact
    series, _ = _fori(100, series_body, (start, jnp.ones_like(xs)))
    out = jnp.where(x > 1, fraction, series)
    out = jnp.where(x == 0, jnp.where(nf > 1, 1.0 / jnp.where(nm1 > 0, nm1, 1.0), jnp.inf), out)
    out = jnp.where(nf == 0, jnp.exp(-x) / x, out)
    return jnp.where((x < 0) | (nf < 0), jnp.nan, out)


def exp1(x):
    """E_1(x) = int_x^inf exp(-t) / t dt."""
    return expn(1, x)


def expi(x):
    """The exponential integral Ei(x): the principal value of int_-inf^x exp(t) / t dt."""
    x = _float(x)[0]
    xp = jnp.where(x > 0, x, 1.0)

    def body(i, state):
        total, term = state
        k = (i + 1).astype(x.dtype)
        term = term * xp / k
        return total + term / k, term
    series, _ = _fori(150, body, (jnp.zeros_like(xp), jnp.ones_like(xp)))
    positive = _EULER + jnp.log(xp) + series
    out = jnp.where(x > 0, positive, -exp1(jnp.where(x < 0, -x, 1.0)))
    return jnp.where(x == 0, -jnp.inf, out)


# --- modified Bessel functions -------------------------------------------------------
# lax's bessel_i0e and bessel_i1e primitives, unscaled by exp(|x|) for i0 and i1.

def i0e(x):
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0."""
    x, = promote_args_inexact(x)
    return lax.bessel_i0e(x)


def i1e(x):
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1."""
    x, = promote_args_inexact(x)
    return lax.bessel_i1e(x)


def i0(x):
    """The modified Bessel function of order 0."""
    x, = promote_args_inexact(x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


def i1(x):
    """The modified Bessel function of order 1."""
    x, = promote_args_inexact(x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i1e(x))


# --- erfcx, poch, bernoulli ---------------------------------------------------------

def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x)."""
    x = _float(x)[0]
    direct = jnp.exp(x * x) * lax.erfc(x)
    # x >= 2: erfcx(x) = 1/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))).
    xl = jnp.where(x >= 2, x, 2.0)
    c = jnp.full_like(xl, 1.0 / _TINY)
    d = 1.0 / xl

    def body(i, state):
        h, c, d = state
        k = (i + 1).astype(x.dtype)
        return _lentz_step(h, c, d, 0.5 * k, xl)
    h, _, _ = _fori(60, body, (d, c, d))
    fraction = h / math.sqrt(math.pi)
    return jnp.where(x >= 2, fraction, direct)


def poch(z, m):
    """The Pochhammer symbol (rising factorial) gamma(z + m) / gamma(z)."""
    z, m = _float(z, m)
    magnitude = jnp.exp(gammaln(z + m) - gammaln(z))
    out = gammasgn(z + m) * gammasgn(z) * magnitude
    return jnp.where(m == 0, 1.0, out)


def bernoulli(n: int):
    """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2), as SciPy returns them."""
    n = int(n)
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    b = np.zeros(n + 1)
    b[0] = 1.0
    for m in range(1, n + 1):
        b[m] = 0.0 if m % 2 and m > 1 else -sum(math.comb(m + 1, k) * b[k] for k in range(m)) / (m + 1)
    return jnp.asarray(b, dtype=jnp.float32)
