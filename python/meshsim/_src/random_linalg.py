"""Samplers built on linear algebra, as jax.random defines them: `multivariate_normal`
(mean + factor @ standard normals, the factor from cholesky, eigh or svd of cov) and
`orthogonal` (the Q of a QR decomposition of a normal matrix, columns signed by R's diagonal)."""
from __future__ import annotations

import numpy as np

from meshsim._src.random import _staged

__all__ = ["multivariate_normal", "orthogonal"]


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method: str = "cholesky"):
    """Samples of N(mean, cov) of batch shape `shape` (default: mean's and cov's batch shapes
    broadcast); the last axis is the event axis."""
    from meshsim._src import random
    from meshsim._src.numpy.promotion import promote_dtypes_inexact
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    key, _ = random._check_prng_key("multivariate_normal", key)
    # mean and cov keep their own (promoted) precision: the factor is computed in it, and
    # only the product with the samples promotes to `dtype`, as in JAX.
    mean, cov = promote_dtypes_inexact(mean, cov)
    dtype = mean.dtype if dtype is None else random._float_dtype("multivariate_normal", dtype)
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {cov.ndim}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but got "
                         f"cov.shape == {cov.shape}.")
    if shape is None:
        shape = tuple(np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2]))
    else:
        shape = random.canonicalize_shape(shape)
        random._check_shape("normal", shape, mean.shape[:-1], cov.shape[:-2])
    return _multivariate_normal(key, mean, cov, tuple(shape), dtype, method)


@_staged(static_argnums=(3, 4, 5))
def _multivariate_normal(key, mean, cov, shape, dtype, method):
    """The draw, under jit as JAX runs it: XLA's rewrites of the program then match."""
    from meshsim._src.numpy import namespace as jnp
    from meshsim._src import random
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = jnp.linalg.cholesky(cov)
    samples = random.normal(key, shape + mean.shape[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, samples)


def orthogonal(key, n: int, shape=(), dtype=None, m: int | None = None):
    """Uniform samples of the orthogonal group O(n) (n x m with orthonormal rows or columns
    when m is given), of batch shape `shape`."""
    from meshsim._src.numpy import namespace as jnp
    from meshsim._src import random
    n = int(n)
    m = n if m is None else int(m)
    dtype = jnp.float32 if dtype is None else dtype
    z = random.normal(key, (*tuple(shape), max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x
