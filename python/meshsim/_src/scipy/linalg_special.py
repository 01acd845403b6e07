"""Special matrices of `jax.scipy.linalg` beyond linalg.py's: the Fiedler companion matrix and
the inverse Pascal matrix."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["fiedler_companion", "invpascal"]


def fiedler_companion(a):
    """The Fiedler companion matrix of the monic polynomial with coefficients `a` (highest
    first): pentadiagonal, with the polynomial's roots as eigenvalues."""
    from meshsim._src.numpy import namespace as jnp
    a = jnp.atleast_1d(jnp.asarray(a))
    if a.ndim != 1:
        raise ValueError("Input 'a' must be a 1-D array.")
    if a.size < 2:
        return jnp.zeros((0, 0), a.dtype)
    if a.size == 2:
        return jnp.array([[-(a[1] / a[0])]], dtype=a.dtype)
    a = a / a[0]
    n = a.size - 1
    c = jnp.zeros((n, n), dtype=a.dtype)
    c = c.at[np.arange(3, n, 2), np.arange(1, n - 2, 2)].set(1.0)
    c = c.at[np.arange(2, n, 2), np.arange(1, n - 1, 2)].set(-a[3::2])
    c = c.at[np.arange(0, n - 2, 2), np.arange(2, n, 2)].set(1.0)
    c = c.at[np.arange(0, n - 1, 2), np.arange(1, n, 2)].set(-a[2::2])
    c = c.at[0, 0].set(-a[1])
    return c.at[1, 0].set(1.0)


def invpascal(n: int, kind: str = "symmetric"):
    """The inverse of the n x n Pascal matrix of `kind` ('symmetric', 'lower' or 'upper'): the
    lower one's inverse has entries (-1)^(i+j) C(i, j); the symmetric one is L L^T."""
    from meshsim._src.numpy import namespace as jnp
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"invalid kind={kind!r}; expected 'symmetric', 'lower', or 'upper'")
    n = int(n)
    lower_inv = np.array([[(-1) ** (i + j) * math.comb(i, j) for j in range(n)] for i in range(n)],
                         dtype=np.float64)
    out = {"symmetric": lower_inv.T @ lower_inv, "lower": lower_inv, "upper": lower_inv.T}[kind]
    return jnp.asarray(out, dtype=jnp.result_type(float))
