"""`jax.scipy.special`, composed from meshsim's elementwise operations as JAX
composes them (log-gamma and digamma are lax's primitives; the normal CDF
through erf/erfc)."""
from __future__ import annotations

import math

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src.lax import namespace as lax
from meshsim._src.ad import custom_jvp
from meshsim._src import nn
from meshsim._src.nn import logsumexp  # noqa: F401  (re-exported)
from meshsim._src.numpy.promotion import promote_args_inexact

__all__ = [
    "logsumexp", "softmax", "log_softmax", "expit", "logit", "erf", "erfc", "erfinv", "ndtr",
    "log_ndtr", "ndtri", "xlogy", "xlog1py", "entr", "kl_div", "rel_entr", "gammaln", "loggamma",
    "gammasgn", "gamma", "digamma", "beta", "betaln", "multigammaln", "factorial", "comb",
    "boxcox", "boxcox1p",
]


def _float(*args):
    """The arguments as arrays of their common inexact dtype (as JAX promotes them)."""
    arrays = [jnp.asarray(a) for a in args]
    dtype = jnp.result_type(*arrays, jnp.float32) if not any(
        jnp.issubdtype(a.dtype, jnp.inexact) for a in arrays) else jnp.result_type(*arrays)
    return [a.astype(dtype) if a.dtype != dtype else a for a in arrays]


def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over `axis` (all axes by default, as in SciPy)."""
    return nn.softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over `axis` (all axes by default, as in SciPy)."""
    return nn.log_softmax(x, axis=axis)


def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    x, = _float(x)
    return lax.logistic(x)


def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    x, = _float(x)
    return lax.log(lax.div(x, lax.sub(lax.full_like(x, 1), x)))


def erf(x):
    x, = _float(x)
    return lax.erf(x)


def erfc(x):
    x, = _float(x)
    return lax.erfc(x)


def erfinv(x):
    x, = _float(x)
    return lax.erf_inv(x)


def ndtr(x):
    """The standard normal CDF, through erf near 0 and erfc in the tails (no cancellation)."""
    x, = _float(x)
    half_sqrt_2 = math.sqrt(0.5)
    w = x * half_sqrt_2
    z = jnp.abs(w)
    tail = jnp.where(w > 0, 1.0 - 0.5 * lax.erfc(z), 0.5 * lax.erfc(z))
    return jnp.where(z < half_sqrt_2, 0.5 + 0.5 * lax.erf(w), tail).astype(x.dtype)


def log_ndtr(x, series_order: int = 3):
    """log(ndtr(x)), accurate far into both tails: log1p(-ndtr(-x)) above the
    upper segment, the asymptotic series below the lower one."""
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x, = _float(x)
    if x.dtype == np.float64:
        lower, upper = -20.0, 8.0
    else:
        lower, upper = -10.0, 5.0
    safe_high = jnp.where(x > upper, x, upper)
    high = lax.log1p(-ndtr(-safe_high))
    mid = lax.log(ndtr(jnp.clip(x, lower, upper)))
    safe_low = jnp.where(x < lower, x, lower)
    low = _log_ndtr_asymptotic(safe_low, series_order)
    return jnp.where(x > upper, high, jnp.where(x > lower, mid, low))


def _log_ndtr_asymptotic(x, series_order: int):
    """log(ndtr(x)) for very negative x: -x^2/2 - log(-x) - log(2 pi)/2 + log(1 + series)."""
    x_2 = jnp.square(x)
    log_scale = -0.5 * x_2 - jnp.log(-x) - 0.5 * math.log(2 * math.pi)
    even, odd = jnp.zeros_like(x), jnp.zeros_like(x)
    x_2n = x_2
    double_fac = 1.0
    for n in range(1, series_order + 1):
        double_fac *= 2 * n - 1  # (2n-1)!!
        term = double_fac / x_2n
        if n % 2:
            odd = odd + term
        else:
            even = even + term
        x_2n = x_2n * x_2
    return log_scale + lax.log1p(even - odd)


# Cephes' rational approximations of the inverse normal CDF.
_NDTRI_P0 = [-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0]
_NDTRI_Q0 = [1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0]
_NDTRI_P1 = [4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4]
_NDTRI_Q1 = [1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4]
_NDTRI_P2 = [3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9]
_NDTRI_Q2 = [1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9]


def _polevl(x, coefs):
    acc = jnp.zeros_like(x)
    for c in coefs:
        acc = acc * x + c
    return acc


def ndtri(p):
    """The inverse of ndtr (Cephes' three-segment rational approximation);
    -inf at 0, inf at 1, nan outside [0, 1]."""
    p, = _float(p)
    dtype = p.dtype
    maybe_complement = jnp.where(p > 1.0 - np.exp(-2.0), 1.0 - p, p)
    # Central segment: p within exp(-2) of 1/2.
    w = maybe_complement - 0.5
    ww = w * w
    central = (w + w * ww * _polevl(ww, _NDTRI_P0) / _polevl(ww, _NDTRI_Q0)) * math.sqrt(2 * math.pi)
    # Tails: z = sqrt(-2 log p), two segments split at z = 8.
    safe = jnp.where(maybe_complement > 0, maybe_complement, 1.0)
    z = jnp.sqrt(-2.0 * jnp.log(safe))
    first = z - jnp.log(z) / z
    inv_z = 1.0 / z
    tail = first - jnp.where(z < 8.0, inv_z * _polevl(inv_z, _NDTRI_P1) / _polevl(inv_z, _NDTRI_Q1),
                             inv_z * _polevl(inv_z, _NDTRI_P2) / _polevl(inv_z, _NDTRI_Q2))
    tail = jnp.where(p > 1.0 - np.exp(-2.0), tail, -tail)
    x = jnp.where(maybe_complement > np.exp(-2.0), central, tail)
    x = jnp.where(p == 0, -np.inf, jnp.where(p == 1, np.inf, x))
    return jnp.where((p < 0) | (p > 1), np.nan, x).astype(dtype)


@custom_jvp
def xlogy(x, y):
    """x * log(y), 0 where x is 0."""
    x, y = _float(x, y)
    safe = jnp.where(x == 0, 1, y)
    return jnp.where(x == 0, 0, x * jnp.log(safe))


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    x, y = _float(*primals)
    tx, ty = tangents
    return xlogy(x, y), tx * jnp.log(y) + ty * x / y


@custom_jvp
def xlog1py(x, y):
    """x * log1p(y), 0 where x is 0."""
    x, y = _float(x, y)
    safe = jnp.where(x == 0, 0, y)
    return jnp.where(x == 0, 0, x * jnp.log1p(safe))


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    x, y = _float(*primals)
    tx, ty = tangents
    return xlog1py(x, y), tx * jnp.log1p(y) + ty * x / (1 + y)


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf below."""
    x, = _float(x)
    return jnp.where(x < 0, -np.inf, -xlogy(x, x))


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 where p is 0 and q >= 0; inf otherwise."""
    p, q = _float(p, q)
    both_gt_zero = (p > 0) & (q > 0)
    one_zero = (p == 0) & (q >= 0)
    safe_p = jnp.where(both_gt_zero, p, 1)
    safe_q = jnp.where(both_gt_zero, q, 1)
    log_val = lax.sub(xlogy(safe_p, safe_p), xlogy(safe_p, safe_q))
    return jnp.where(both_gt_zero, log_val, jnp.where(one_zero, 0, np.inf))


def kl_div(p, q):
    """p log(p / q) - p + q for p, q > 0; q where p is 0; inf otherwise."""
    p, q = _float(p, q)
    both_gt_zero = (p > 0) & (q > 0)
    one_zero = (p == 0) & (q >= 0)
    safe_p = jnp.where(both_gt_zero, p, 1)
    safe_q = jnp.where(both_gt_zero, q, 1)
    log_val = xlogy(safe_p, safe_p) - xlogy(safe_p, safe_q) - safe_p + safe_q
    return jnp.where(both_gt_zero, log_val, jnp.where(one_zero, q, np.inf))


def gammaln(x):
    """log|Gamma(x)|; inf at the poles (non-positive integers)."""
    x, = promote_args_inexact(x)
    return lax.lgamma(x)


loggamma = gammaln


def digamma(x):
    """The logarithmic derivative of Gamma; nan at the poles."""
    x, = promote_args_inexact(x)
    return lax.digamma(x)


def gammasgn(x):
    """The sign of Gamma(x): -1 on the negative intervals of odd floor, nan at poles."""
    x, = _float(x)
    floor_x = jnp.floor(x)
    sign = jnp.where((x > 0) | (floor_x % 2 == 0), 1.0, -1.0).astype(x.dtype)
    sign = jnp.where(x == 0, jnp.copysign(1.0, x), sign)
    return jnp.where((x < 0) & (x == floor_x), np.nan, jnp.where(jnp.isnan(x), np.nan, sign))


def gamma(x):
    """Gamma(x) = gammasgn(x) * exp(gammaln(x))."""
    x, = _float(x)
    return gammasgn(x) * jnp.exp(gammaln(x))


def betaln(a, b):
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)."""
    a, b = _float(a, b)
    return gammaln(a) + gammaln(b) - gammaln(a + b)


def beta(a, b):
    """B(a, b), with its sign."""
    a, b = _float(a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * jnp.exp(betaln(a, b))


def multigammaln(a, d: int):
    """The log of the multivariate gamma function of dimension d."""
    d = int(d)
    a, = _float(a)
    constant = 0.25 * d * (d - 1) * math.log(math.pi)
    res = sum(gammaln(a - 0.5 * i) for i in range(d))
    return constant + res


def factorial(n, exact: bool = False):
    """n! as Gamma(n + 1) (0 for negative n); `exact` is not supported, as in JAX."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n, = _float(n)
    return jnp.where(n < 0, 0, jnp.exp(gammaln(n + 1)))


def comb(N, k, exact: bool = False, repetition: bool = False):
    """N choose k through gammaln (with repetition: N + k - 1 choose k); 0 outside 0 <= k <= N."""
    if exact:
        raise NotImplementedError("comb with exact=True")
    N, k = _float(N, k)
    if repetition:
        return comb(N + k - 1, k)
    valid = (k >= 0) & (k <= N) & (N >= 0)
    one = jnp.ones_like(N)
    log_comb = gammaln(N + one) - gammaln(k + one) - gammaln(N - k + one)
    return jnp.where(valid, jnp.exp(log_comb), 0)


def boxcox(x, lmbda):
    """(x^lmbda - 1) / lmbda, log(x) at lmbda = 0."""
    x, lmbda = _float(x, lmbda)
    safe = jnp.where(lmbda == 0, 1, lmbda)
    return jnp.where(lmbda == 0, jnp.log(x), jnp.expm1(safe * jnp.log(x)) / safe)


def boxcox1p(x, lmbda):
    """boxcox of 1 + x, computed with log1p."""
    x, lmbda = _float(x, lmbda)
    safe = jnp.where(lmbda == 0, 1, lmbda)
    return jnp.where(lmbda == 0, jnp.log1p(x), jnp.expm1(safe * jnp.log1p(x)) / safe)
