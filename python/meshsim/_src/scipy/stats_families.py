"""The remaining distributions of `jax.scipy.stats`: the discrete counts (binom, betabinom,
nbinom, geom, multinomial), the chi-squared, Dirichlet, generalized normal, Gumbel, Pareto,
truncated normal, von Mises and wrapped Cauchy laws, and the Poisson entropy. Each is written
in the order of JAX's operations, so that values and gradients round as JAX's do."""
from __future__ import annotations

import numpy as np

from meshsim._src import nn
from meshsim._src.lax import namespace as lax
from meshsim._src.numpy import namespace as jnp
from meshsim._src.scipy import special_series
from meshsim._src.scipy.special import _float, betaln, entr, gammaln, log_ndtr, ndtr, xlog1py, xlogy
from meshsim._src.scipy.stats import norm_logpdf, poisson_pmf


def _nan_unless(ok, value):
    return jnp.where(ok, value, np.nan)


# --- binom, betabinom, nbinom, geom, multinomial ---------------------------------------

def binom_logpmf(k, n, p, loc=0):
    k, n, p, loc = _float(k, n, p, loc)
    y = k - loc
    comb_term = gammaln(n + 1) - (gammaln(y + 1) + gammaln(n - y + 1))
    log_linear_term = xlogy(y, p) + xlog1py(n - y, -p)
    log_probs = comb_term + log_linear_term
    # 0 successes of 0 trials, or a term of p^0 (1-p)^0, has probability one exactly.
    log_probs = jnp.where(((y == 0) & (n == 0)) | (log_linear_term == 0), 0.0, log_probs)
    return jnp.where((k >= loc) & (k < loc + n + 1), log_probs, -np.inf)


def binom_pmf(k, n, p, loc=0):
    return jnp.exp(binom_logpmf(k, n, p, loc))


def betabinom_logpmf(k, n, a, b, loc=0):
    k, n, a, b, loc = _float(k, n, a, b, loc)
    y = jnp.floor(k) - loc
    log_comb = -(jnp.log1p(n) + betaln(n - y + 1, y + 1))
    log_beta_ratio = betaln(y + a, n - y + b) - betaln(a, b)
    log_probs = jnp.where((y == 0) & (n == 0), 0.0, log_comb + log_beta_ratio)
    log_probs = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, log_probs)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, log_probs)


def betabinom_pmf(k, n, a, b, loc=0):
    return jnp.exp(betabinom_logpmf(k, n, a, b, loc))


def nbinom_logpmf(k, n, p, loc=0):
    k, n, p, loc = _float(k, n, p, loc)
    y = k - loc
    comb_term = gammaln(y + n) - gammaln(n) - gammaln(y + 1)
    log_linear_term = xlogy(n, p) + xlogy(y, 1 - p)
    return jnp.where(k < loc, -np.inf, comb_term + log_linear_term)


def nbinom_pmf(k, n, p, loc=0):
    return jnp.exp(nbinom_logpmf(k, n, p, loc))


def geom_logpmf(k, p, loc=0):
    k, p, loc = _float(k, p, loc)
    x = k - loc
    return jnp.where(x <= 0, -np.inf, xlog1py(x - 1, -p) + jnp.log(p))


def geom_pmf(k, p, loc=0):
    return jnp.exp(geom_logpmf(k, p, loc))


def multinomial_logpmf(x, n, p):
    p, = _float(p)
    x, n = jnp.asarray(x), jnp.asarray(n)
    counts_dtype = jnp.result_type(x, n)
    if not jnp.issubdtype(counts_dtype, jnp.integer):
        raise ValueError(f"x and n must be of integer type; got x.dtype={counts_dtype}, "
                         f"n.dtype={counts_dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    log_probs = gammaln(n + 1) + jnp.sum(xlogy(x, p) - gammaln(x + 1), axis=-1)
    return jnp.where(jnp.sum(x) == n, log_probs, -np.inf)


def multinomial_pmf(x, n, p):
    return jnp.exp(multinomial_logpmf(x, n, p))


# --- chi2 ------------------------------------------------------------------------------

def chi2_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _float(x, df, loc, scale)
    y = (x - loc) / scale
    half_df = df / 2
    kernel = (half_df - 1) * jnp.log(y) - y / 2
    log_normalizer = -(lax.lgamma(half_df) + jnp.log(np.asarray(2, x.dtype)) * df / 2)
    return jnp.where(x < loc, -np.inf, log_normalizer - jnp.log(scale) + kernel)


def chi2_pdf(x, df, loc=0, scale=1):
    return jnp.exp(chi2_logpdf(x, df, loc, scale))


def _chi2_half(x, df, loc, scale):
    """df/2 and (x-loc)/(2 scale) clamped to [0, inf]: the arguments of the incomplete gamma."""
    x, df, loc, scale = _float(x, df, loc, scale)
    y = (x - loc) / (scale * 2)
    # clamp, not clip: its gradient is a select, which drops the pole of d/dx at 0.
    return df / 2, lax.clamp(np.array(0, y.dtype), y, np.array(np.inf, y.dtype))


def chi2_cdf(x, df, loc=0, scale=1):
    return special_series.gammainc(*_chi2_half(x, df, loc, scale))


def chi2_logcdf(x, df, loc=0, scale=1):
    return jnp.log(chi2_cdf(x, df, loc, scale))


def chi2_sf(x, df, loc=0, scale=1):
    return special_series.gammaincc(*_chi2_half(x, df, loc, scale))


def chi2_logsf(x, df, loc=0, scale=1):
    return jnp.log(chi2_sf(x, df, loc, scale))


# --- dirichlet -------------------------------------------------------------------------

def dirichlet_logpdf(x, alpha):
    x, alpha = _float(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError("`x` must have either the same number of entries as `alpha` or one entry "
                         f"fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:  # the last coordinate is implied by the simplex
        x = jnp.concatenate([x, 1 - x.sum(0, keepdims=True)], axis=0)
    log_normalizer = jnp.sum(gammaln(alpha)) - gammaln(jnp.sum(alpha))
    alpha = alpha.reshape(alpha.shape + (1,) * (x.ndim - 1))
    log_probs = jnp.sum(xlogy(alpha - 1, x), axis=0) - log_normalizer
    on_simplex = jnp.all(x > 0, axis=0) & (abs(jnp.sum(x, axis=0) - 1) < 1e-6)
    return jnp.where(on_simplex, log_probs, -np.inf)


def dirichlet_pdf(x, alpha):
    return jnp.exp(dirichlet_logpdf(x, alpha))


# --- gennorm ---------------------------------------------------------------------------

def gennorm_logpdf(x, beta):
    x, beta = _float(x, beta)
    return jnp.log(0.5 * beta) - lax.lgamma(1 / beta) - jnp.abs(x) ** beta


def gennorm_pdf(x, beta):
    return jnp.exp(gennorm_logpdf(x, beta))


def gennorm_cdf(x, beta):
    x, beta = _float(x, beta)
    return 0.5 * (1 + jnp.sign(x) * lax.igamma(1 / beta, jnp.abs(x) ** beta))


# --- gumbel_l, gumbel_r ----------------------------------------------------------------

def _gumbel_z(x, loc, scale):
    x, loc, scale = _float(x, loc, scale)
    return (x - loc) / scale, scale > 0, x, loc, scale


def gumbel_l_logpdf(x, loc=0, scale=1):
    z, ok, _, _, scale = _gumbel_z(x, loc, scale)
    return _nan_unless(ok, xlogy(-1, scale) + (z - jnp.exp(z)))


def gumbel_l_pdf(x, loc=0, scale=1):
    return jnp.exp(gumbel_l_logpdf(x, loc, scale))


def gumbel_l_logcdf(x, loc=0, scale=1):
    z, ok, *_ = _gumbel_z(x, loc, scale)
    return _nan_unless(ok, jnp.log(-jnp.expm1(-jnp.exp(z))))


def gumbel_l_cdf(x, loc=0, scale=1):
    return jnp.exp(gumbel_l_logcdf(x, loc, scale))


def gumbel_l_logsf(x, loc=0, scale=1):
    z, ok, *_ = _gumbel_z(x, loc, scale)
    return _nan_unless(ok, -jnp.exp(z))


def gumbel_l_sf(x, loc=0, scale=1):
    return jnp.exp(gumbel_l_logsf(x, loc, scale))


def gumbel_l_ppf(p, loc=0, scale=1):
    p, loc, scale = _float(p, loc, scale)
    return _nan_unless((p > 0) & (p < 1), loc + scale * jnp.log(xlog1py(-1, -p)))


def gumbel_r_logpdf(x, loc=0, scale=1):
    z, ok, _, _, scale = _gumbel_z(x, loc, scale)
    return _nan_unless(ok, xlogy(-1, scale) + -(z + jnp.exp(-z)))


def gumbel_r_pdf(x, loc=0, scale=1):
    return jnp.exp(gumbel_r_logpdf(x, loc, scale))


def gumbel_r_logcdf(x, loc=0, scale=1):
    z, ok, *_ = _gumbel_z(x, loc, scale)
    return _nan_unless(ok, -jnp.exp(-z))


def gumbel_r_cdf(x, loc=0, scale=1):
    return jnp.exp(gumbel_r_logcdf(x, loc, scale))


def gumbel_r_sf(x, loc=0, scale=1):
    _, ok, x, loc, scale = _gumbel_z(x, loc, scale)
    return _nan_unless(ok, 1 - jnp.exp(-jnp.exp((loc - x) / scale)))


def gumbel_r_logsf(x, loc=0, scale=1):
    _, ok, x, loc, scale = _gumbel_z(x, loc, scale)
    return _nan_unless(ok, nn.log1mexp(jnp.exp((loc - x) / scale)))


def gumbel_r_ppf(p, loc=0, scale=1):
    p, loc, scale = _float(p, loc, scale)
    return _nan_unless((p > 0) & (p < 1), loc - scale * jnp.log(xlogy(-1, p)))


# --- pareto ----------------------------------------------------------------------------

def _pareto(x, b, loc, scale):
    """The promoted arguments, (x - loc) / scale and whether x lies below the support."""
    x, b, loc, scale = _float(x, b, loc, scale)
    return (x - loc) / scale, x < loc + scale, b, scale


def pareto_logpdf(x, b, loc=0, scale=1):
    z, below, b, scale = _pareto(x, b, loc, scale)
    return jnp.where(below, -np.inf, -(jnp.log(scale / b) + (b + 1) * jnp.log(z)))


def pareto_pdf(x, b, loc=0, scale=1):
    return jnp.exp(pareto_logpdf(x, b, loc, scale))


def pareto_cdf(x, b, loc=0, scale=1):
    z, below, b, _ = _pareto(x, b, loc, scale)
    return jnp.where(below, 0, 1 - lax.pow(z, -b))


def pareto_logcdf(x, b, loc=0, scale=1):
    z, below, b, _ = _pareto(x, b, loc, scale)
    return jnp.where(below, -np.inf, jnp.log1p(-lax.pow(z, -b)))


def pareto_logsf(x, b, loc=0, scale=1):
    z, below, b, _ = _pareto(x, b, loc, scale)
    return jnp.where(below, 0, -(b * jnp.log(z)))


def pareto_sf(x, b, loc=0, scale=1):
    return jnp.exp(pareto_logsf(x, b, loc, scale))


def pareto_ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = _float(q, b, loc, scale)
    quantile = loc + scale * lax.pow(1 - q, -(1 / b))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, quantile)


# --- truncnorm -------------------------------------------------------------------------

def _log_gauss_mass(a, b):
    """log of the standard normal's mass on [a, b]: a difference of tails when both ends lie
    on one side of 0 (no cancellation), one minus the two tails otherwise."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    left, right = b <= 0, a > 0
    a_tail, b_tail = jnp.where(right, -b, a), jnp.where(right, -a, b)
    tail = nn.logsumexp(jnp.array([log_ndtr(b_tail), log_ndtr(a_tail)]),
                        b=jnp.array([jnp.ones_like(b_tail), -jnp.ones_like(a_tail)]), axis=0)
    central = jnp.log1p(-ndtr(a) - ndtr(-b))
    return jnp.where(~(left | right), central, tail)


def truncnorm_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _float(x, a, b, loc, scale)
    log_density = norm_logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    log_density = jnp.where((z < a) | (z > b), -np.inf, log_density)
    return jnp.where(a >= b, np.nan, log_density)


def truncnorm_pdf(x, a, b, loc=0, scale=1):
    return jnp.exp(truncnorm_logpdf(x, a, b, loc, scale))


def truncnorm_logcdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _float(x, a, b, loc, scale)
    x, a, b = jnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    log_mass = _log_gauss_mass(a, b)
    log_cdf = _log_gauss_mass(a, z) - log_mass
    log_sf = _log_gauss_mass(z, b) - log_mass
    # Near 1 the cdf is taken from the sf, whose log keeps the digits.
    log_cdf = jnp.select([z >= b, z <= a, log_cdf > -0.1, z > a],
                         [0, -np.inf, jnp.log1p(-jnp.exp(log_sf)), log_cdf])
    return jnp.where(a >= b, np.nan, log_cdf)


def truncnorm_cdf(x, a, b, loc=0, scale=1):
    return jnp.exp(truncnorm_logcdf(x, a, b, loc, scale))


def truncnorm_logsf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _float(x, a, b, loc, scale)
    return truncnorm_logcdf(-x, -b, -a, -loc, scale)


def truncnorm_sf(x, a, b, loc=0, scale=1):
    return jnp.exp(truncnorm_logsf(x, a, b, loc, scale))


# --- vonmises, wrapcauchy --------------------------------------------------------------

def vonmises_logpdf(x, kappa):
    x, kappa = _float(x, kappa)
    # log(exp(kappa cos x) / (2 pi I0(kappa))) with I0 scaled by exp(-kappa): no overflow.
    return _nan_unless(kappa > 0, kappa * (jnp.cos(x) - 1) - jnp.log(2 * np.pi * lax.bessel_i0e(kappa)))


def vonmises_pdf(x, kappa):
    return jnp.exp(vonmises_logpdf(x, kappa))


def wrapcauchy_logpdf(x, c):
    x, c = _float(x, c)
    log_density = (jnp.log(1 - c * c) - jnp.log(2 * np.pi)
                   - jnp.log(1 + c * c - 2 * c * jnp.cos(x)))
    log_density = jnp.where((x >= 0) & (x <= np.pi * 2), log_density, -np.inf)
    return _nan_unless((c > 0) & (c < 1), log_density)


def wrapcauchy_pdf(x, c):
    return jnp.exp(wrapcauchy_logpdf(x, c))


# --- poisson entropy -------------------------------------------------------------------

def _poisson_entropy_by_sum(mu, terms, upper_bound):
    """-sum p log p over k < min(terms, upper_bound(mu)) (mu a vector)."""
    k = jnp.arange(terms, dtype=mu.dtype)[:, None]
    probs = jnp.where(k < jnp.ceil(upper_bound(mu)).astype(k.dtype)[None, :], poisson_pmf(k, mu, 0), 0.0)
    return jnp.sum(entr(probs), axis=0)


def poisson_entropy(mu, loc=0):
    """Summed over the bulk of the mass for mu < 100, the asymptotic series beyond; loc
    only broadcasts (a shift does not change the entropy)."""
    mu, loc = _float(mu, loc)
    flat = jnp.ravel(mu)
    small = _poisson_entropy_by_sum(flat, 35, lambda m: m + 20)
    medium = _poisson_entropy_by_sum(flat, 250, lambda m: m + 10 * jnp.sqrt(m) + 20)
    large = 0.5 * jnp.log(2 * np.pi * np.e * flat) - 1.0 / (12 * flat)
    entropy = jnp.where(flat == 0, jnp.zeros_like(flat),
                        jnp.where(flat < 10, small, jnp.where(flat < 100, medium, large)))
    return jnp.broadcast_to(entropy.reshape(mu.shape), jnp.broadcast_shapes(mu.shape, loc.shape))
