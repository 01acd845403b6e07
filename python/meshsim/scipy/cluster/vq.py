"""meshsim.scipy.cluster.vq (as jax.scipy.cluster.vq)."""
from __future__ import annotations

__all__ = ["vq"]


def vq(obs, code_book, check_finite: bool = True):
    """Assigns each observation (row of `obs`, or element of a 1-D `obs`) the index of its
    nearest code in `code_book` by Euclidean distance; returns (codes, distances)."""
    import meshsim
    import meshsim.numpy as jnp
    del check_finite  # nothing to check: non-finite values give non-finite distances
    obs, code_book = jnp.asarray(obs), jnp.asarray(code_book)
    inexact = jnp.result_type(obs, code_book, float)
    obs, code_book = obs.astype(inexact), code_book.astype(inexact)
    if obs.ndim != code_book.ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, code_book = obs[..., None], code_book[..., None]
    if obs.ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    distances = meshsim.vmap(lambda row: jnp.linalg.norm(row[None] - code_book, axis=-1))(obs)
    codes = jnp.argmin(distances, axis=-1)
    return codes, meshsim.vmap(lambda d, c: d[c])(distances, codes)
