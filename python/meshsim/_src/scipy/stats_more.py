"""More of `jax.scipy.stats`: the CDFs that need the incomplete gamma and beta functions
(gamma, beta, poisson), the multivariate normal density, and the sample statistics `sem`,
`rankdata` and `mode`."""
from __future__ import annotations

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src.scipy import special_series
from meshsim._src.scipy.special import _float

__all__ = ["gamma_cdf", "gamma_sf", "gamma_logcdf", "gamma_logsf", "beta_cdf", "beta_sf",
           "beta_logcdf", "beta_logsf", "poisson_cdf", "multivariate_normal_logpdf",
           "multivariate_normal_pdf", "sem", "rankdata", "mode"]


def gamma_cdf(x, a, loc=0, scale=1):
    x, a, loc, scale = _float(x, a, loc, scale)
    return special_series.gammainc(a, jnp.maximum((x - loc) / scale, 0))


def gamma_sf(x, a, loc=0, scale=1):
    x, a, loc, scale = _float(x, a, loc, scale)
    return special_series.gammaincc(a, jnp.maximum((x - loc) / scale, 0))


def gamma_logcdf(x, a, loc=0, scale=1):
    return jnp.log(gamma_cdf(x, a, loc, scale))


def gamma_logsf(x, a, loc=0, scale=1):
    return jnp.log(gamma_sf(x, a, loc, scale))


def beta_cdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _float(x, a, b, loc, scale)
    return special_series.betainc(a, b, jnp.clip((x - loc) / scale, 0, 1))


def beta_sf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = _float(x, a, b, loc, scale)
    return special_series.betainc(b, a, 1 - jnp.clip((x - loc) / scale, 0, 1))


def beta_logcdf(x, a, b, loc=0, scale=1):
    return jnp.log(beta_cdf(x, a, b, loc, scale))


def beta_logsf(x, a, b, loc=0, scale=1):
    return jnp.log(beta_sf(x, a, b, loc, scale))


def poisson_cdf(k, mu, loc=0):
    k, mu, loc = _float(k, mu, loc)
    x = k - loc
    p = special_series.gammaincc(jnp.floor(1 + x), mu)
    return jnp.where(x < 0, 0.0, p)


def multivariate_normal_logpdf(x, mean, cov, allow_singular=None):
    """log N(x; mean, cov) over the last axis (cov a scalar, a vector or a matrix)."""
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = _float(x, mean, cov)
    if not mean.shape:
        return (-1 / 2 * jnp.square(x - mean) / cov - 1 / 2 * (jnp.log(2 * np.pi) + jnp.log(cov)))
    n = mean.shape[-1]
    if not np.shape(cov):
        y = x - mean
        return (-1 / 2 * jnp.einsum("...i,...i->...", y, y) / cov
                - n / 2 * (jnp.log(2 * np.pi) + jnp.log(cov)))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes")
    chol = jnp.linalg.cholesky(cov)
    from meshsim._src.scipy import linalg as sla
    y = jnp.vectorize(lambda c, v: sla.solve_triangular(c, v, lower=True), signature="(n,n),(n)->(n)")(
        chol, x - mean)
    return (-1 / 2 * jnp.einsum("...i,...i->...", y, y) - n / 2 * jnp.log(2 * np.pi)
            - jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)).sum(-1))


def multivariate_normal_pdf(x, mean, cov):
    return jnp.exp(multivariate_normal_logpdf(x, mean, cov))


def sem(a, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *, keepdims=False):
    """The standard error of the mean: std(a, ddof) / sqrt(count) along `axis`."""
    a = _float(a)[0]
    if nan_policy not in ("propagate", "omit"):
        raise ValueError(f"nan_policy must be 'propagate' or 'omit', got {nan_policy}")
    if nan_policy == "omit":
        count = jnp.sum(~jnp.isnan(a), axis=axis, keepdims=keepdims)
        return jnp.nanstd(a, axis=axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(count)
    size = a.size if axis is None else a.shape[axis]
    return jnp.std(a, axis=axis, ddof=ddof, keepdims=keepdims) / np.sqrt(size)


def rankdata(a, method: str = "average", *, axis: int | None = None, nan_policy: str = "propagate"):
    """Ranks (from 1) of the values of `a`, ties broken as `method` says."""
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    if nan_policy != "propagate":
        raise NotImplementedError("rankdata with nan_policy other than 'propagate'")
    a = jnp.asarray(a)
    if axis is not None:
        return jnp.apply_along_axis(lambda v: rankdata(v, method), axis, a)
    return _ranks(jnp.ravel(a), method).astype(jnp.result_type(float))


def _ranks(arr, method: str):
    n = arr.size
    order = jnp.argsort(arr, stable=True)
    inv = jnp.zeros(n, dtype=jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
    if method == "ordinal":
        return inv + 1
    sorted_arr = arr[order]
    new = jnp.concatenate([jnp.array([True]), sorted_arr[1:] != sorted_arr[:-1]])
    dense = jnp.cumsum(new)[inv]
    if method == "dense":
        return dense
    starts = jnp.nonzero(jnp.concatenate([new, jnp.array([True])]), size=n + 1)[0]
    counts = starts
    if method == "max":
        return counts[dense]
    if method == "min":
        return counts[dense - 1] + 1
    return 0.5 * (counts[dense] + counts[dense - 1] + 1)


def mode(a, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False):
    """The most common value along `axis` (the smallest among ties) and its count."""
    if nan_policy != "propagate":
        raise NotImplementedError("mode with nan_policy other than 'propagate'")
    a = jnp.asarray(a)
    if axis is None:
        a, axis = jnp.ravel(a), 0
    axis = axis % a.ndim if a.ndim else 0
    moved = jnp.moveaxis(a, axis, -1) if a.ndim else a.reshape(1)
    srt = jnp.sort(moved, axis=-1)
    counts = jnp.sum(srt[..., :, None] == srt[..., None, :], axis=-1)
    best = jnp.argmax(counts, axis=-1)
    value = jnp.take_along_axis(srt, best[..., None], axis=-1)[..., 0]
    count = jnp.take_along_axis(counts, best[..., None], axis=-1)[..., 0]
    if keepdims:
        value, count = jnp.expand_dims(value, axis), jnp.expand_dims(count, axis)
    return ModeResult(value, count.astype(jnp.int32))


class ModeResult(tuple):
    """(mode, count), as a named pair."""
    def __new__(cls, mode, count):
        return super().__new__(cls, (mode, count))

    mode = property(lambda self: self[0])
    count = property(lambda self: self[1])

