"""meshsim.scipy.signal (as jax.scipy.signal): `detrend`."""
from __future__ import annotations

import numpy as np

__all__ = ["detrend"]


def detrend(data, axis: int = -1, type: str = "linear", bp=0, overwrite_data=None):  # noqa: A002
    """`data` minus its mean ('constant') or minus its least-squares line on each segment
    between the breakpoints `bp` ('linear'), along `axis`."""
    import meshsim.numpy as jnp
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    data = jnp.asarray(data)
    data = data.astype(jnp.result_type(data, float))
    if type == "constant":
        return data - data.mean(axis, keepdims=True)
    n = data.shape[axis]
    bounds = np.unique(np.r_[0, np.asarray(bp, dtype=int), n])
    if np.any(bounds > n):
        raise ValueError("Breakpoints must be non-negative and less than length of data along given axis.")
    moved = jnp.moveaxis(data, axis, 0)
    pieces = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        seg = moved[lo:hi]
        t = jnp.arange(1, hi - lo + 1, dtype=seg.dtype) / (hi - lo)
        a = jnp.stack([t, jnp.ones_like(t)], axis=1)
        flat = seg.reshape(hi - lo, -1)
        coef = jnp.linalg.lstsq(a, flat)[0]
        pieces.append((flat - a @ coef).reshape(seg.shape))
    return jnp.moveaxis(jnp.concatenate(pieces, axis=0), 0, axis)
