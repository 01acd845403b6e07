"""Building arrays from functions, buffers, nested lists of blocks and index
expressions: `fromfunction`, `frombuffer`, `fromstring`, `block`, and the
index tricks `mgrid`, `ogrid`, `r_`, `c_` (as jax.numpy has them)."""
from __future__ import annotations

import numpy as np

from meshsim._src import api

__all__ = ["fromfunction", "frombuffer", "fromstring", "fromiter", "fromfile", "block", "mgrid",
           "ogrid", "r_", "c_"]


def _jnp():
    from meshsim._src.numpy import namespace as jnp
    return jnp


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """`function` evaluated at every index of `shape`: mapped (vmap) over one
    coordinate per dimension, so it sees scalar coordinates."""
    from meshsim._src.vmap import vmap
    jnp = _jnp()
    shape = tuple(int(s) for s in shape)
    n = len(shape)
    f = function
    for k in reversed(range(n)):
        f = vmap(f, in_axes=tuple(0 if j == k else None for j in range(n)))
    coords = [jnp.arange(s, dtype=dtype) for s in shape]
    return f(*coords, **kwargs)


def frombuffer(buffer, dtype=float, count: int = -1, offset: int = 0):
    """The bytes of `buffer` read as a 1-d array of `dtype`."""
    return _jnp().asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype=float, count: int = -1, *, sep: str):
    """The numbers in `string`, separated by `sep`, as a 1-d array."""
    return _jnp().asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def _impure(name: str, consumed: str) -> NotImplementedError:
    """JAX's refusal of the NumPy readers that consume their source."""
    return NotImplementedError(
        f"jnp.{name}() is not implemented because it may be non-pure and thus unsafe for use "
        f"with JIT and other JAX transformations. Consider using jnp.asarray(np.{name}(...)) "
        f"instead, although care should be taken if np.{name} is used within a jax transformations "
        f"because of its potential side-effect of consuming the {consumed}; for more information see "
        "https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html#pure-functions")


def fromiter(*args, **kwargs):
    raise _impure("fromiter", "iterable object")


def fromfile(*args, **kwargs):
    raise _impure("fromfile", "file object")


def _block_depth(x) -> int:
    return 1 + _block_depth(x[0]) if isinstance(x, list) and x else (1 if isinstance(x, list) else 0)


def _block(x, depth: int, level: int, result_ndim: int):
    jnp = _jnp()
    if not isinstance(x, list):
        a = jnp.asarray(x)
        return a.reshape((1,) * (result_ndim - a.ndim) + a.shape)
    if not x:
        raise ValueError("Lists cannot be empty")
    parts = [_block(item, depth, level + 1, result_ndim) for item in x]
    return jnp.concatenate(parts, axis=-(depth - level))


@api.jitted_when_traced
def block(arrays):
    """An array assembled from nested lists of blocks: the innermost lists
    are joined along the last axis, each enclosing list along the one before."""
    jnp = _jnp()
    if isinstance(arrays, tuple):
        raise ValueError(f"jax.numpy.block does not allow tuples, got {arrays}")
    depth = _block_depth(arrays)

    def max_ndim(x):
        return max((max_ndim(i) for i in x), default=0) if isinstance(x, list) else jnp.ndim(x)
    if depth == 0:
        return jnp.asarray(arrays)
    return _block(arrays, depth, 0, max(depth, max_ndim(arrays)))


def _slice_values(s: slice):
    """A slice of an index trick as the numbers it stands for (a complex step
    is a number of points, endpoint included)."""
    jnp = _jnp()
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        return jnp.linspace(start, s.stop, int(abs(step)))
    return jnp.arange(start, s.stop, step)


class _Mgrid:
    """`mgrid[a:b, c:d]`: a dense grid of coordinates (indexing 'ij'), stacked."""

    def __getitem__(self, key):
        jnp = _jnp()
        if isinstance(key, slice):
            return _slice_values(key)
        grids = jnp.meshgrid(*[_slice_values(k) for k in key], indexing="ij")
        return jnp.stack(grids, 0) if grids else jnp.arange(0)


class _Ogrid:
    """`ogrid[a:b, c:d]`: open grids of coordinates, each broadcastable to the dense grid."""

    def __getitem__(self, key):
        jnp = _jnp()
        if isinstance(key, slice):
            return _slice_values(key)
        values = [_slice_values(k) for k in key]
        dtype = jnp.result_type(*values) if values else None
        n = len(values)
        return [v.astype(dtype).reshape((1,) * i + (-1,) + (1,) * (n - i - 1))
                for i, v in enumerate(values)]


class _AxisConcatenator:
    """`r_[...]`/`c_[...]`: slices, scalars and arrays joined along an axis; a
    leading string "axis[,ndmin[,trans1d]]" (or "r"/"c") sets how."""

    def __init__(self, axis: int, ndmin: int, trans1d: int):
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __getitem__(self, key):
        jnp = _jnp()
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        matrix = None
        if items and isinstance(items[0], str):
            directive = items.pop(0)
            if directive in ("r", "c"):
                matrix = directive
                ndmin, axis, trans1d = 2, 0, -1
            else:
                parts = [int(p) for p in directive.split(",")]
                axis = parts[0]
                if len(parts) > 1:
                    ndmin = parts[1]
                if len(parts) > 2:
                    trans1d = parts[2]
        arrays = []
        for item in items:
            if isinstance(item, slice):
                a = _slice_values(item)
            elif isinstance(item, str):
                raise ValueError("string directive must be placed at the beginning")
            else:
                a = jnp.asarray(item)
            item_ndim = a.ndim
            if a.ndim < ndmin:
                a = a.reshape((1,) * (ndmin - a.ndim) + a.shape)
                if trans1d != -1 and item_ndim < ndmin:
                    k2 = ndmin - item_ndim
                    k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
                    axes = list(range(ndmin))
                    a = a.transpose(axes[:k1] + axes[k2:] + axes[k1:k2])
            arrays.append(a)
        out = jnp.concatenate(arrays, axis=axis)
        if matrix == "c":
            out = out.T
        return out


mgrid = _Mgrid()
ogrid = _Ogrid()
r_ = _AxisConcatenator(0, 1, -1)
c_ = _AxisConcatenator(-1, 2, 0)
