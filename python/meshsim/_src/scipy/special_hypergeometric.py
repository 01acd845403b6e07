"""Hypergeometric functions and Bessel functions of integer order in `jax.scipy.special`, by
JAX's algorithms:

- hyp1f1 and hyp2f1 follow Pearson, Olver and Porter (2014): the Taylor series (at most 250
  terms, stopping at machine-epsilon relative size), 1F1's asymptotic series for |x| >= 100,
  2F1's terminating sum when a or b is a non-positive integer, its x -> 1 - x transform
  (Abramowitz and Stegun 15.3.10-12) near x = 1, and the closed forms of the special cases;
  their derivatives in a, b, c are the series of Wolfram's functions site 20/01/0x;
- bessel_jn: Zhang and Jin's backward recurrence from order n_iter, normalised by
  J_0 + 2 (J_2 + J_4 + ...) = 1.

JAX evaluates these elementwise under `vectorize`, where a batched `while_loop` keeps running
until every element has converged and freezes the converged ones; `_masked_while` does the
same on whole arrays, so the values agree term for term."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src.lax import namespace as lax
from meshsim._src.ad import custom_jvp
from meshsim._src.scipy.special import _float, digamma, gamma

__all__ = ["hyp1f1", "hyp2f1", "bessel_jn"]

_MAX_TERMS = 250


def _masked_while(keep_going, body, state):
    """Iterate body over a tuple of equally shaped arrays while any element's keep_going holds,
    leaving the elements that stopped unchanged (a batched while_loop)."""
    def step(s):
        live = keep_going(s)
        return tuple(jnp.where(live, new, old) for new, old in zip(body(s), s))
    return lax.while_loop(lambda s: jnp.any(keep_going(s)), step, state)


def _eps(x):
    return float(jnp.finfo(x.dtype).eps)


def _series(first, ratio, weight, x, start_sum):
    """sum over k >= 1 of weight(k) * t_k, where t_1 = first and t_{k+1} = t_k * ratio(k),
    stopping per element when |t_k| <= eps |sum| or after 250 terms."""
    eps = _eps(x)

    def keep_going(s):
        total, k, term = s
        return (k < _MAX_TERMS) & (jnp.abs(term) / jnp.abs(total) > eps)

    def body(s):
        total, k, term = s
        return total + weight(k) * term, k + 1, term * ratio(k)
    one = jnp.ones_like(x)
    return _masked_while(keep_going, body, (start_sum * one, one, first * one))[0]


# --- 1F1 ------------------------------------------------------------------------------------

def _hyp1f1_taylor(a, b, x):
    return _series(a / b * x, lambda k: (a + k) / (b + k) * x / (k + 1), lambda k: 1.0, x, 1.0)


def _hyp1f1_asymptotic(a, b, x):
    total = _series((b - a) * (1 - a) / x, lambda k: (b - a + k) * (1 - a + k) / (k + 1) / x,
                    lambda k: 1.0, x, 1.0)
    return gamma(b) / gamma(a) * jnp.exp(x) * x ** (a - b) * total


def _hyp1f1_value(a, b, x):
    out = jnp.where(jnp.abs(x) < 100, _hyp1f1_taylor(a, b, x), _hyp1f1_asymptotic(a, b, x))
    case = (a == 0) * 1 + ((a == b) & (a != 0)) * 2 + ((b == 0) & (a != 0)) * 3
    return lax.select_n(case, out, jnp.ones_like(x), jnp.exp(x), jnp.full_like(x, np.inf))


@custom_jvp
def _hyp1f1(a, b, x):
    return _hyp1f1_value(a, b, x)


def _hyp1f1_parameter_derivative(a, b, x, weight):
    return _series(a / b * x, lambda k: (a + k) / (b + k) * x / (k + 1), weight, x, 0.0)


@_hyp1f1.defjvp
def _hyp1f1_jvp(primals, tangents):
    a, b, x = primals
    da, db, dx = tangents
    d_a = _hyp1f1_parameter_derivative(a, b, x, lambda k: digamma(a + k) - digamma(a))
    d_b = _hyp1f1_parameter_derivative(a, b, x, lambda k: digamma(b) - digamma(b + k))
    d_x = a / b * _hyp1f1(a + 1, b + 1, x)
    return _hyp1f1(a, b, x), d_a * da + d_b * db + d_x * dx


def hyp1f1(a, b, x):
    """The confluent hypergeometric function 1F1(a; b; x) for real arguments (1 at a = b = 0)."""
    a, b, x = _float(a, b, x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError("hyp1f1 does not support complex-valued inputs.")
    return _hyp1f1(*jnp.broadcast_arrays(a, b, x))


# --- 2F1 ------------------------------------------------------------------------------------

def _hyp2f1_terminating(a, b, c, x):
    """The polynomial 2F1 when a or b is a non-positive integer: |a| + 1 terms of the series,
    taking for a the integer parameter that ends it (the one of larger magnitude that does not
    pass a non-positive integer c)."""
    eps = _eps(x) * 50
    swap = (b < a) & (jnp.abs(b - jnp.round(b)) < eps) & ~((c % 1 == 0) & (c <= 0) & (c > b))
    a, b = jnp.where(swap, b, a), jnp.where(swap, a, b)
    a = jnp.abs(a)

    def body(s):
        total, term, i = s
        term = term * (-(a - i + 1) / (c + i - 1) * (b + i - 1) / i * x)
        return total + term, term, i + 1
    one = jnp.ones_like(x)
    return _masked_while(lambda s: s[2] < a + 1, body, (one, one, one))[0]


def _hyp2f1_taylor(a, b, c, x):
    eps = _eps(x)

    def keep_going(s):
        total, k, term = s
        return (k < _MAX_TERMS) & (jnp.abs(term) > eps * jnp.abs(total))

    def body(s):
        total, k, term = s
        return total + term, k + 1, term * ((a + k - 1) * (b + k - 1) / (c + k - 1) / k * x)
    one = jnp.ones_like(x)
    return _masked_while(keep_going, body, (jnp.zeros_like(x), one, one))[0]


def _hyp2f1_near_one(a, b, c, x):
    """2F1 near x = 1 when c - a - b is (close to) an integer m: the digamma series of
    Abramowitz and Stegun 15.3.10-12, plus the finite sum of |m| - 1 terms when m != 0."""
    eps = _eps(x)
    d = c - a - b
    s = 1 - x
    rd = jnp.round(d)
    e = jnp.where(rd >= 0, d, -d)
    d1 = jnp.where(rd >= 0, d, 0.0)
    d2 = jnp.where(rd >= 0, 0.0, d)
    ard = jnp.where(rd >= 0, rd, -rd).astype(np.int32)
    log_s = jnp.log(s)
    y = (digamma(jnp.ones_like(x)) + digamma(1.0 + e) - digamma(a + d1) - digamma(b + d1) - log_s)
    y = y / gamma(e + 1.0)
    p = (a + d1) * (b + d1) * s / gamma(e + 2.0)

    def keep_going(st):
        p, q, t, y = st
        return (t < _MAX_TERMS) & (jnp.abs(q) >= eps * jnp.abs(y))

    def body(st):
        p, q, t, y = st
        r = digamma(1.0 + t) + digamma(1.0 + t + e) - digamma(a + t + d1) - digamma(b + t + d1) - log_s
        q = p * r
        p = p * (s * (a + t + d1) / (t + 1.0))
        p = p * ((b + t + d1) / (t + 1.0 + e))
        return p, q, t + 1.0, y + q
    _, _, _, y = _masked_while(keep_going, body, (p, y, jnp.ones_like(x), y))

    def finite_sum(s_i):
        p, t, y1, i = s_i
        p = p * (s * (a + t + d2) * (b + t + d2) / (1.0 - e + t))
        t = t + 1.0
        p = p / t
        return p, t, y1 + p, i + 1
    one = jnp.ones_like(x)
    _, _, y1, _ = _masked_while(lambda st: st[3] < ard, finite_sum,
                                (one, jnp.zeros_like(x), one, jnp.ones_like(ard)))
    gc = gamma(c)
    y1 = y1 * gamma(e) * gc / (gamma(a + d1) * gamma(b + d1))
    y_m = y * gc / (gamma(a + d2) * gamma(b + d2))
    y_m = jnp.where((ard & 1) != 0, -y_m, y_m)
    q = s ** rd
    mixed = jnp.where(rd > 0, y_m * q + y1, y_m + y1 * q)
    return jnp.where(rd == 0, y * gc / (gamma(a) * gamma(b)), mixed)


def _hyp2f1_general(a, b, c, x):
    eps = _eps(x) * 50
    d = c - a - b
    neg_int_a = (a <= 0) & (jnp.abs(a - jnp.round(a)) < eps)
    neg_int_b = (b <= 0) & (jnp.abs(b - jnp.round(b)) < eps)
    terminating = neg_int_a | neg_int_b
    case = jnp.where((x > 0.9) & ~terminating, jnp.where(jnp.abs(d - jnp.round(d)) >= eps, 0, 1),
                     jnp.where(terminating, 2, 0))
    return lax.select_n(case, _hyp2f1_taylor(a, b, c, x), _hyp2f1_near_one(a, b, c, x),
                        _hyp2f1_terminating(a, b, c, x))


def _hyp2f1_value(a, b, c, x):
    eps = _eps(x) * 50
    d, s, ca, cb = c - a - b, 1 - x, c - a, c - b
    d_not_int = jnp.abs(d - jnp.round(d)) >= eps
    case = jnp.where(
        (x == 0) | (((a == 0) | (b == 0)) & (c != 0)), 0,
        jnp.where((c == 0) | ((c < 0) & (c % 1 == 0)), 1,
                  jnp.where((d <= -1) & ~(d_not_int & (s < 0)), 2,
                            jnp.where((d <= 0) & (x == 1), 1,
                                      jnp.where((x < 1) & (b == c), 3,
                                                jnp.where((x < 1) & (a == c), 4,
                                                          jnp.where(x > 1, 1, jnp.where(x == 1, 5, 6))))))))
    return lax.select_n(case, jnp.ones_like(x), jnp.full_like(x, np.inf),
                        s ** d * _hyp2f1_general(ca, cb, c, x), s ** (-a), s ** (-b),
                        gamma(c) * gamma(d) / (gamma(ca) * gamma(cb)), _hyp2f1_general(a, b, c, x))


@custom_jvp
def _hyp2f1(a, b, c, x):
    return _hyp2f1_value(a, b, c, x)


@_hyp2f1.defjvp
def _hyp2f1_jvp(primals, tangents):
    a, b, c, x = primals
    da, db, dc, dx = tangents

    def by(weight):
        return _series(a * b / c * x, lambda k: (a + k) * (b + k) / (c + k) / (k + 1) * x, weight, x, 0.0)
    d_a = by(lambda k: digamma(a + k) - digamma(a))
    d_b = by(lambda k: digamma(b + k) - digamma(b))
    d_c = by(lambda k: digamma(c) - digamma(c + k))
    d_x = a * b / c * _hyp2f1(a + 1, b + 1, c + 1, x)
    return _hyp2f1(a, b, c, x), d_a * da + d_b * db + d_c * dc + d_x * dx


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x) for real arguments."""
    a, b, c, x = _float(a, b, c, x)
    return _hyp2f1(*jnp.broadcast_arrays(a, b, c, x))


# --- Bessel J_n -----------------------------------------------------------------------------

def bessel_jn(z, *, v: int, n_iter: int = 50):
    """J_0(z) .. J_v(z) stacked in a leading axis of size v + 1, by backward recurrence from
    order n_iter (accurate when n_iter is well above |z| and v)."""
    z, = _float(z)  # a complex z fails at the parity test (JAX's complex check never fires)
    v, n_iter = operator.index(v), int(n_iter)  # a traced order fails here, as in JAX

    def step(carry, k):
        f0, f1, even_sum = carry
        f = 2.0 * (k + 1.0) * f1 / z - f0
        even_sum = jnp.where(k % 2 == 0, even_sum + 2.0 * f, even_sum)
        return (f1, f, even_sum), f
    init = (jnp.zeros_like(z), jnp.full_like(z, 1e-16), jnp.zeros_like(z))
    (_, _, even_sum), values = lax.scan(step, init, jnp.arange(n_iter + 1, dtype=z.dtype), reverse=True)
    return values[:v + 1] / (even_sum - values[0])

