"""The distributions of `jax.scipy.stats`, written with meshsim.numpy and
`scipy.special` as JAX writes them. Each function is named
`<distribution>_<method>`; `meshsim.scipy.stats.<distribution>` exposes them
under JAX's names (`norm.logpdf`, ...)."""
from __future__ import annotations

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src.scipy.special import (_float, expit, gammaln, log_ndtr, logit, ndtr, ndtri,
                                        betaln, xlog1py, xlogy)


def _standardize(x, loc, scale):
    x, loc, scale = _float(x, loc, scale)
    return (x - loc) / scale, x, loc, scale


# --- norm ------------------------------------------------------------------------------

def norm_logpdf(x, loc=0, scale=1):
    # -(log(2 pi scale^2) + (x - loc)^2 / scale^2) / 2, in JAX's order, for JAX's bits.
    x, loc, scale = _float(x, loc, scale)
    scale_squared = jnp.square(scale)
    log_normalizer = jnp.log(np.array(2 * np.pi, x.dtype) * scale_squared)
    quadratic = jnp.square(x - loc) / scale_squared
    return (log_normalizer + quadratic) / np.array(-2, x.dtype)


def norm_pdf(x, loc=0, scale=1):
    return jnp.exp(norm_logpdf(x, loc, scale))


def norm_cdf(x, loc=0, scale=1):
    return ndtr(_standardize(x, loc, scale)[0])


def norm_logcdf(x, loc=0, scale=1):
    return log_ndtr(_standardize(x, loc, scale)[0])


def norm_sf(x, loc=0, scale=1):
    return ndtr(-_standardize(x, loc, scale)[0])


def norm_logsf(x, loc=0, scale=1):
    return log_ndtr(-_standardize(x, loc, scale)[0])


def norm_ppf(q, loc=0, scale=1):
    q, loc, scale = _float(q, loc, scale)
    return ndtri(q) * scale + loc


def norm_isf(q, loc=0, scale=1):
    q, loc, scale = _float(q, loc, scale)
    return ndtri(1 - q) * scale + loc


# --- expon -----------------------------------------------------------------------------

def expon_logpdf(x, loc=0, scale=1):
    z, x, loc, scale = _standardize(x, loc, scale)
    return jnp.where(x < loc, -np.inf, -z - jnp.log(scale))


def expon_pdf(x, loc=0, scale=1):
    return jnp.exp(expon_logpdf(x, loc, scale))


def expon_cdf(x, loc=0, scale=1):
    z, x, loc, _ = _standardize(x, loc, scale)
    return jnp.where(x < loc, 0, -jnp.expm1(-z))


def expon_logcdf(x, loc=0, scale=1):
    return jnp.log(expon_cdf(x, loc, scale))


def expon_sf(x, loc=0, scale=1):
    return jnp.exp(expon_logsf(x, loc, scale))


def expon_logsf(x, loc=0, scale=1):
    z, x, loc, _ = _standardize(x, loc, scale)
    return jnp.where(x < loc, 0, -z)


def expon_ppf(q, loc=0, scale=1):
    q, loc, scale = _float(q, loc, scale)
    return jnp.where((q < 0) | (q > 1), np.nan, -jnp.log1p(-q) * scale + loc)


# --- uniform ---------------------------------------------------------------------------

def uniform_logpdf(x, loc=0, scale=1):
    x, loc, scale = _float(x, loc, scale)
    return jnp.where((x < loc) | (x > loc + scale), -np.inf, -jnp.log(scale))


def uniform_pdf(x, loc=0, scale=1):
    return jnp.exp(uniform_logpdf(x, loc, scale))


def uniform_cdf(x, loc=0, scale=1):
    x, loc, scale = _float(x, loc, scale)
    return jnp.clip((x - loc) / scale, 0, 1)


def uniform_ppf(q, loc=0, scale=1):
    q, loc, scale = _float(q, loc, scale)
    return jnp.where((q < 0) | (q > 1) | jnp.isnan(q), np.nan, loc + q * scale)


# --- cauchy ----------------------------------------------------------------------------

def cauchy_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _standardize(x, loc, scale)
    return -np.log(np.pi) - jnp.log(scale) - jnp.log1p(z * z)


def cauchy_pdf(x, loc=0, scale=1):
    return jnp.exp(cauchy_logpdf(x, loc, scale))


def cauchy_cdf(x, loc=0, scale=1):
    z = _standardize(x, loc, scale)[0]
    return 0.5 + jnp.arctan(z) / np.pi


def cauchy_logcdf(x, loc=0, scale=1):
    return jnp.log(cauchy_cdf(x, loc, scale))


def cauchy_sf(x, loc=0, scale=1):
    z = _standardize(x, loc, scale)[0]
    return 0.5 - jnp.arctan(z) / np.pi


def cauchy_logsf(x, loc=0, scale=1):
    return jnp.log(cauchy_sf(x, loc, scale))


def cauchy_ppf(q, loc=0, scale=1):
    q, loc, scale = _float(q, loc, scale)
    return loc + scale * jnp.tan(np.pi * (q - 0.5))


def cauchy_isf(q, loc=0, scale=1):
    q, loc, scale = _float(q, loc, scale)
    return loc + scale * jnp.tan(np.pi * (0.5 - q))


# --- laplace ---------------------------------------------------------------------------

def laplace_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _standardize(x, loc, scale)
    return -np.log(2.0) - jnp.log(scale) - jnp.abs(z)


def laplace_pdf(x, loc=0, scale=1):
    return jnp.exp(laplace_logpdf(x, loc, scale))


def laplace_cdf(x, loc=0, scale=1):
    z = _standardize(x, loc, scale)[0]
    return jnp.where(z < 0, 0.5 * jnp.exp(z), 1 - 0.5 * jnp.exp(-z))


# --- logistic --------------------------------------------------------------------------

def logistic_logpdf(x, loc=0, scale=1):
    z, _, _, scale = _standardize(x, loc, scale)
    a = jnp.abs(z)
    return -a - 2 * jnp.log1p(jnp.exp(-a)) - jnp.log(scale)


def logistic_pdf(x, loc=0, scale=1):
    return jnp.exp(logistic_logpdf(x, loc, scale))


def logistic_cdf(x, loc=0, scale=1):
    return expit(_standardize(x, loc, scale)[0])


def logistic_sf(x, loc=0, scale=1):
    return expit(-_standardize(x, loc, scale)[0])


def logistic_ppf(q, loc=0, scale=1):
    q, loc, scale = _float(q, loc, scale)
    return logit(q) * scale + loc


def logistic_isf(q, loc=0, scale=1):
    q, loc, scale = _float(q, loc, scale)
    return -logit(q) * scale + loc


# --- bernoulli -------------------------------------------------------------------------

def bernoulli_logpmf(k, p, loc=0):
    k, p, loc = _float(k, p, loc)
    x = k - loc
    log_probs = xlogy(x, p) + xlog1py(1 - x, -p)
    return jnp.where((x < 0) | (x > 1), -np.inf, log_probs)


def bernoulli_pmf(k, p, loc=0):
    return jnp.exp(bernoulli_logpmf(k, p, loc))


def bernoulli_cdf(k, p):
    k, p = _float(k, p)
    out = jnp.where(k < 0, 0, jnp.where(k < 1, 1 - p, 1))
    return jnp.where((p < 0) | (p > 1) | jnp.isnan(k), np.nan, out)


def bernoulli_ppf(q, p):
    q, p = _float(q, p)
    out = jnp.where(q <= 1 - p, 0, 1)
    return jnp.where((q < 0) | (q > 1) | (p < 0) | (p > 1) | jnp.isnan(q), np.nan, out)


# --- poisson ---------------------------------------------------------------------------

def poisson_logpmf(k, mu, loc=0):
    k, mu, loc = _float(k, mu, loc)
    x = k - loc
    log_probs = xlogy(x, mu) - gammaln(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(k) != k), -np.inf, log_probs)


def poisson_pmf(k, mu, loc=0):
    return jnp.exp(poisson_logpmf(k, mu, loc))


# --- gamma -----------------------------------------------------------------------------

def gamma_logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = _float(x, a, loc, scale)
    y = (x - loc) / scale
    log_probs = xlogy(a - 1, y) - y - gammaln(a) - jnp.log(scale)
    return jnp.where(x < loc, -np.inf, log_probs)


def gamma_pdf(x, a, loc=0, scale=1):
    return jnp.exp(gamma_logpdf(x, a, loc, scale))


# --- beta ------------------------------------------------------------------------------

def beta_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _float(x, a, b, loc, scale)
    y = (x - loc) / scale
    log_probs = -betaln(a, b) + xlogy(a - 1, y) + xlog1py(b - 1, -y) - jnp.log(scale)
    return jnp.where((y < 0) | (y > 1), -np.inf, log_probs)


def beta_pdf(x, a, b, loc=0, scale=1):
    return jnp.exp(beta_logpdf(x, a, b, loc, scale))


# --- t ---------------------------------------------------------------------------------

def t_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _float(x, df, loc, scale)
    z = (x - loc) / scale
    normalize = (gammaln(df / 2) - gammaln((df + 1) / 2) + 0.5 * jnp.log(df * np.pi)
                 + jnp.log(scale))
    return -(df + 1) / 2 * jnp.log1p(z * z / df) - normalize


def t_pdf(x, df, loc=0, scale=1):
    return jnp.exp(t_logpdf(x, df, loc, scale))
