"""meshsim.numpy: least-squares polynomial fits and division (`polyfit`, `polydiv`), the
contraction order of an einsum (`einsum_path`), and .npy/.npz files (`save`, `savez`, `load`),
as jax.numpy has them."""
from __future__ import annotations

import numpy as np

__all__ = ["polyfit", "polydiv", "einsum_path", "save", "savez", "load"]

# Files are written by NumPy from the arrays' values, as in JAX.
save = np.save
savez = np.savez


def load(file, *args, **kwargs):
    """np.load, with a single array returned as a meshsim array (.npz files stay NumPy's)."""
    from meshsim._src.numpy import namespace as jnp
    out = np.load(file, *args, **kwargs)
    return jnp.asarray(out) if isinstance(out, np.ndarray) else out


def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov: bool = False):
    """The least-squares polynomial of degree `deg` through (x, y), highest power first
    (columns of the Vandermonde matrix scaled to unit norm before solving, as NumPy does)."""
    from meshsim._src.numpy import namespace as jnp
    if full or cov:
        raise NotImplementedError("polyfit(full=True) and polyfit(cov=True)")
    x, y = jnp.asarray(x), jnp.asarray(y)
    x, y = x.astype(jnp.result_type(x, y, float)), y.astype(jnp.result_type(x, y, float))
    deg = int(deg)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = len(x) * float(np.finfo(x.dtype).eps)
    lhs = jnp.vander(x, deg + 1)
    rhs = y
    if w is not None:
        w = jnp.asarray(w)
        lhs = lhs * w[:, None]
        rhs = rhs * (w if rhs.ndim == 1 else w[:, None])
    scale = jnp.sqrt(jnp.sum(lhs * lhs, axis=0))
    coef, _, _, _ = jnp.linalg.lstsq(lhs / scale, rhs, rcond)
    return (coef.T / scale).T


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """The quotient and remainder of the polynomial division u / v."""
    from meshsim._src.numpy import namespace as jnp
    u, v = jnp.asarray(u), jnp.asarray(v)
    dtype = jnp.result_type(u, v, float)
    u, v = u.astype(dtype), v.astype(dtype)
    m, n = len(u) - 1, len(v) - 1
    scale = 1.0 / v[0]
    q = jnp.zeros(max(m - n + 1, 1), dtype)
    r = u
    for k in range(m - n + 1):
        d = scale * r[k]
        q = q.at[k].set(d)
        r = r.at[k:k + n + 1].add(-d * v)
    if trim_leading_zeros:
        r = np.trim_zeros(np.asarray(r), "f")
        r = jnp.asarray(r if r.size else np.zeros(1, dtype))
    return q, r


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """The order in which `einsum` contracts the operands (pairs of positions) and a report, as
    NumPy's greedy path search gives them."""
    shapes = [np.empty(np.shape(o), dtype=np.int8) for o in operands]
    strategy = "greedy" if optimize in ("auto", True, "greedy") else optimize
    path, report = np.einsum_path(subscripts, *shapes, optimize=strategy)
    return [tuple(p) for p in path[1:]], report
