"""meshsim.numpy: selecting by conditions and index arithmetic — nonzero, argwhere, bincount,
select, diagonal, unravel_index/ravel_multi_index, choose, compress, place, put, piecewise, ...
(indexing itself, x[idx] and x.at[idx], is in indexing.py)."""
from __future__ import annotations

import math
import operator

import numpy as np

from meshsim._src import api, core
from meshsim._src.lax import indexing as lax_indexing
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy.indexing import _int32, _is_concrete, _ravel
from meshsim._src.numpy.promotion import broadcast_shapes, broadcast_to_shape, promote_args
from meshsim._src import dtype_kinds

__all__ = ["nonzero", "argwhere", "flatnonzero", "bincount", "select", "diagonal", "unravel_index",
           "ravel_multi_index", "fill_diagonal", "choose", "compress", "extract", "place", "put", "piecewise"]


# ---------------------------------------------------------------- nonzero & co.

def nonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements, one int32 array per dimension. Needs a concrete `a`
    unless `size` is given (then the result is truncated or padded with fill_value)."""
    a = core.asarray_value(a)
    if a.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use jnp.atleast_1d(scalar).nonzero() "
                         "instead. If this is being called on a 0d array, use jnp.atleast_1d.")
    if size is None:
        if not _is_concrete(a):
            raise TypeError(f"jnp.nonzero needs concrete values to know its output shape; got {core.typeof(a)}. "
                            "Pass a static `size=` argument to use it inside jit.")
        return tuple(_int32(i) for i in np.nonzero(np.asarray(a)))
    size = operator.index(size)
    fills = fill_value if isinstance(fill_value, tuple) else (0 if fill_value is None else fill_value,) * a.ndim
    if len(fills) != a.ndim:
        raise ValueError(f"fill_value must be a scalar or a tuple of length {a.ndim}; got {fill_value}")
    if a.size == 0:
        return tuple(broadcast_to_shape(core.convert_element_type(core.asarray_value(f), np.int32), (size,))
                     for f in fills)
    positions, valid = _first_nonzero_positions(a, size)
    coords, stride = [], a.size
    for d, n in enumerate(a.shape):
        stride //= max(n, 1)
        c = _elementwise("div", positions, stride) if stride != 1 else positions
        c = _elementwise("rem", c, n) if d > 0 and n else c
        fill = core.convert_element_type(core.asarray_value(fills[d]), np.int32)
        coords.append(core.bind1("select_n", valid, broadcast_to_shape(fill, (size,)), c))
    return tuple(coords)


def _elementwise(prim, x, scalar):
    return core.bind1(prim, x, broadcast_to_shape(_int32(scalar), x.shape))


def _first_nonzero_positions(a, size):
    """Flat positions of the first `size` nonzeros of `a` (in order) and a mask of the valid ones."""
    flat = _ravel(a)
    zero = broadcast_to_shape(core.convert_element_type(core.asarray_value(0), flat.dtype), flat.shape)
    is_zero = core.bind1("eq", flat, zero)
    iota = core.bind1("iota", dtype=np.dtype(np.int32), shape=(flat.size,), dimension=0)
    _, order = core.bind("sort", is_zero, iota, dimension=0, is_stable=True, num_keys=1)
    first = _int32(np.arange(size))
    positions = lax_indexing.gather(order, [first], (0,), 0, "fill", 0)
    is_nonzero = core.bind1("not", is_zero)
    count = core.bind1("reduce_sum", core.convert_element_type(is_nonzero, np.int32), axes=(0,))
    valid = core.bind1("lt", first, broadcast_to_shape(count, (size,)))
    return positions, valid


def argwhere(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements as an (N, a.ndim) int32 array."""
    a = core.asarray_value(a)
    cols = nonzero(_ravel(a) if a.ndim == 0 else a, size=size, fill_value=fill_value)
    cols = [core.bind1("reshape", c, new_sizes=(c.shape[0], 1), dimensions=None) for c in cols]
    out = core.bind1("concatenate", *cols, dimension=1)
    return out if a.ndim else core.bind1("slice", out, start_indices=(0, 0), limit_indices=(out.shape[0], 0),
                                         strides=None)


def flatnonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements of the flattened array."""
    return nonzero(_ravel(core.asarray_value(a)), size=size, fill_value=fill_value)[0]


# ---------------------------------------------------------------- bincount, select, diagonal

def bincount(x, weights=None, minlength=0, *, length=None, out_sharding=None):
    """Counts (or sums `weights`) per value of the non-negative integers x; negative values
    count as 0, values >= length are dropped. Inside jit, `length` must be given."""
    x = core.asarray_value(x)
    if not dtype_kinds.issubdtype(x.dtype, np.integer):
        raise TypeError(f"x argument to bincount must have an integer type; got {x.dtype}")
    if x.ndim != 1:
        raise ValueError("only 1-dimensional input supported.")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError(f"minlength must be non-negative, got {minlength}")
    if length is None:
        if not _is_concrete(x):
            raise TypeError("jnp.bincount needs a concrete `x` to know its output length; got "
                            f"{core.typeof(x)}. Pass a static `length=` argument to use it inside jit.")
        length = max(minlength, int(np.asarray(x).max()) + 1 if x.size else 0)
    else:
        length = max(operator.index(length), minlength)
    weights = core.asarray_value(1 if weights is None else weights)
    dtype = np.dtype(np.int32) if weights.dtype == np.bool_ else weights.dtype
    weights = broadcast_to_shape(core.convert_element_type(weights, dtype), x.shape)
    x = core.bind1("max", x, broadcast_to_shape(core.convert_element_type(core.asarray_value(0), x.dtype), x.shape))
    zeros = broadcast_to_shape(core.convert_element_type(core.asarray_value(0), dtype), (length,))
    return lax_indexing.scatter("scatter_add", zeros, weights, [x], (0,), 0)


def select(condlist, choicelist, default=0):
    """choicelist[i] where condlist[i] is first true, else default."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} vs {len(choicelist)})")
    if len(condlist) == 0:
        raise ValueError("condlist must be non-empty")
    conds = [core.asarray_value(c) for c in condlist]
    for c in conds:
        if c.dtype != np.bool_:
            raise TypeError(f"condlist must be a list of boolean arrays, got {c.dtype}")
    choices = promote_args(default, *choicelist)
    shape = broadcast_shapes(*(v.shape for v in (*choices, *conds)))
    result = broadcast_to_shape(choices[0], shape)
    for cond, choice in reversed(list(zip(conds, choices[1:]))):
        result = core.bind1("select_n", broadcast_to_shape(cond, shape), result, broadcast_to_shape(choice, shape))
    return result


@api.jitted_when_traced(static_argnames=('offset', 'axis1', 'axis2'))
def diagonal(a, offset=0, axis1: int = 0, axis2: int = 1):
    """The diagonal of `a` over axis1/axis2, as the last dimension of the result."""
    a = core.asarray_value(a)
    if a.ndim < 2:
        raise ValueError("diagonal requires an array of at least two dimensions.")
    axis1, axis2 = canonicalize_axis(axis1, a.ndim), canonicalize_axis(axis2, a.ndim)
    if axis1 == axis2:
        raise ValueError("axis1 and axis2 must not be equal")
    offset = operator.index(offset)
    n = max(0, min(a.shape[axis1] + min(offset, 0), a.shape[axis2] - max(offset, 0)))
    rows = _int32(np.arange(n) - min(offset, 0))
    cols = _int32(np.arange(n) + max(offset, 0))
    return lax_indexing.gather(a, [rows, cols], (axis1, axis2), a.ndim - 2)



# ---------------------------------------------------------------- index arithmetic and selection

def _arrays(name: str, *args):
    from meshsim._src.numpy.creation import _check_arraylike
    _check_arraylike(name, *args)
    return [core.asarray_value(a) for a in args]


def unravel_index(indices, shape):
    """The coordinates in an array of `shape` of flat indices (out-of-range ones are clipped)."""
    from meshsim._src.numpy import namespace as jnp
    (indices,) = _arrays("unravel_index", indices)
    try:
        shape = list(shape)
    except TypeError:
        shape = [shape]
    if any(np.ndim(s) != 0 for s in shape):
        raise ValueError("unravel_index: shape should be a scalar or 1D sequence.")
    out = [0] * len(shape)
    for i, s in reversed(list(enumerate(shape))):
        indices, out[i] = jnp.divmod(indices, s)
    oob_pos = indices > 0
    oob_neg = jnp.asarray(False) if dtype_kinds.issubdtype(indices.dtype, np.unsignedinteger) else indices < -1
    return tuple(jnp.where(oob_pos, s - 1, jnp.where(oob_neg, 0, i)) for s, i in zip(shape, out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """The flat indices of coordinates `multi_index` in an array of shape `dims`."""
    from meshsim._src.numpy import namespace as jnp
    from meshsim._src.numpy.creation import user_dtype
    if len(multi_index) != len(dims):
        raise AssertionError(f"len(multi_index)={len(multi_index)} != len(dims)={len(dims)}")
    dims = tuple(operator.index(d) for d in dims)
    multi_index = _arrays("ravel_multi_index", *multi_index)
    if dtype is None:
        dtype = jnp.result_type(int, *multi_index)
    else:
        dtype = user_dtype(dtype)
    if not dtype_kinds.issubdtype(dtype, np.integer):
        raise ValueError(f"dtype={dtype} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"jnp.ravel_multi_index: dtype={dtype} not large enough to hold flattened index for "
                         f"dims={dims}. Use the dtype argument to pass a suitable dtype "
                         "(e.g. dtype=np.min_scalar_type(prod(dims))).")
    for index in multi_index:
        if mode == "raise" and isinstance(index, core.Tracer):
            raise TypeError("ravel_multi_index needs concrete indices with mode='raise' (it checks them); "
                            "use mode='wrap' or mode='clip' under jit")
        if not dtype_kinds.issubdtype(index.dtype, np.integer):
            raise TypeError("only int indices permitted")
    if mode == "raise":
        if any(bool(jnp.any((i < 0) | (i >= d))) for i, d in zip(multi_index, dims)):
            raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        multi_index = [jnp.clip(i, 0, d - 1) for i, d in zip(multi_index, dims)]
    elif mode == "wrap":
        multi_index = [i % d for i, d in zip(multi_index, dims)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or 'ignore'.")
    if order == "F":
        strides = np.cumprod((1,) + dims[:-1])
    elif order == "C":
        strides = np.cumprod((1,) + dims[1:][::-1])[::-1]
    else:
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    result = jnp.array(0, dtype=dtype)
    for i, s in zip(multi_index, strides):
        result = result + i.astype(dtype) * int(s)
    return result


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """A copy of a with its main diagonal set to val (inplace=False is required: arrays are immutable)."""
    from meshsim._src.numpy import namespace as jnp
    if inplace:
        raise NotImplementedError("JAX arrays are immutable, must use inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    a, val = _arrays("fill_diagonal", a, val)
    if a.ndim < 2:
        raise ValueError("array must be at least 2-d")
    if a.ndim > 2 and not all(n == a.shape[0] for n in a.shape[1:]):
        raise ValueError("All dimensions of input must be of equal length")
    n = min(a.shape)
    idx = jnp.diag_indices(n, a.ndim)
    if val.ndim:
        val = jnp.ravel(val)
        val = jnp.tile(val, -(-n // val.size))[:n] if val.size else val
    return a.at[idx].set(val)


def choose(a, choices, out=None, mode="raise"):
    """choices[a[i]][i] for each position i (choices broadcast against a)."""
    from meshsim._src.numpy import namespace as jnp
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    a, *choices = _arrays("choose", a, *choices)
    if not dtype_kinds.issubdtype(a.dtype, np.integer):
        raise ValueError("`a` array must be integer typed")
    N = len(choices)
    if mode == "raise":
        if isinstance(a, core.Tracer):
            raise TypeError("jnp.choose needs a concrete `a` with mode='raise' (it checks the entries); "
                            "use mode='wrap' or mode='clip' under jit")
        if bool(jnp.any((a < 0) | (a >= N))):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        a = a % N
    elif mode == "clip":
        a = jnp.clip(a, 0, N - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    a, *choices = jnp.broadcast_arrays(a, *choices)
    return jnp.stack(choices)[(a,) + jnp.indices(a.shape, sparse=True)]


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of a along axis where condition is True (padded to `size` with fill_value)."""
    from meshsim._src.numpy import namespace as jnp
    condition, arr, fill_value = _arrays("compress", condition, a, fill_value)
    condition = condition.astype(bool)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    if condition.ndim != 1:
        raise ValueError("condition must be a 1D array")
    if axis is None:
        axis, arr = 0, jnp.ravel(arr)
    else:
        arr = jnp.moveaxis(arr, axis, 0)
    condition, extra = condition[:arr.shape[0]], condition[arr.shape[0]:]
    arr = arr[:condition.shape[0]]
    if size is None:
        if bool(jnp.any(extra)):
            raise ValueError("condition contains entries that are out of bounds")
        result = arr[condition]
    elif not 0 <= size <= arr.shape[0]:
        raise ValueError("size must be positive and not greater than the size of the array axis; "
                         f"got size={size} for a.shape[axis]={arr.shape[0]}")
    else:
        mask = jnp.expand_dims(condition, tuple(range(1, arr.ndim)))
        arr = jnp.where(mask, arr, jnp.array(fill_value, dtype=arr.dtype))
        result = arr[jnp.argsort(condition, stable=True, descending=True)][:size]
    return jnp.moveaxis(result, 0, axis)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of arr where condition is True, flattened."""
    from meshsim._src.numpy import namespace as jnp
    _arrays("extreact", condition, arr, fill_value)
    return compress(jnp.ravel(condition), jnp.ravel(arr), size=size, fill_value=fill_value)


def place(arr, mask, vals, *, inplace: bool = True):
    """A copy of arr with the positions where mask is True set to vals, cycled in order."""
    from meshsim._src.numpy import namespace as jnp
    if inplace:
        raise ValueError("jax.numpy.place cannot modify arrays in-place, because JAX arrays are immutable. "
                         "Pass inplace=False to instead return an updated array.")
    arr, mask, vals = _arrays("place", arr, mask, vals)
    vals = jnp.ravel(vals)
    if arr.size != mask.size:
        raise ValueError("place: arr and mask must be the same size")
    if not vals.size:
        raise ValueError("Cannot place values from an empty array")
    if not arr.size:
        return arr
    indices = jnp.where(jnp.ravel(mask), size=mask.size, fill_value=mask.size)[0]
    vals = jnp.take(vals, jnp.arange(indices.size), mode="wrap")
    return jnp.ravel(arr).at[indices].set(vals, mode="drop").reshape(arr.shape)


def put(a, ind, v, mode=None, *, inplace: bool = True):
    """A copy of a with the flat positions ind set to v (v cycled to ind's length)."""
    from meshsim._src.numpy import namespace as jnp
    if inplace:
        raise ValueError("jax.numpy.put cannot modify arrays in-place, because JAX arrays are immutable. "
                         "Pass inplace=False to instead return an updated array.")
    arr, ind, v = _arrays("put", a, ind, v)
    ind, v = jnp.ravel(ind), jnp.ravel(v)
    if not arr.size or not ind.size or not v.size:
        return arr
    v = jnp.take(v, jnp.arange(ind.size), mode="wrap")
    if mode is None:
        scatter_mode = "drop"
    elif mode == "clip":
        ind, scatter_mode = jnp.clip(ind, 0, arr.size - 1), "promise_in_bounds"
    elif mode == "wrap":
        ind, scatter_mode = ind % arr.size, "promise_in_bounds"
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
    else:
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    return arr.at[unravel_index(ind, arr.shape)].set(v, mode=scatter_mode)


def piecewise(x, condlist, funclist, *args, **kw):
    """funclist[i](x) (or the constant funclist[i]) where condlist[i]; the last condition wins."""
    from meshsim._src.numpy import namespace as jnp
    (x,) = _arrays("piecewise", x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = funclist[-1:] + funclist[:-1]
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are expected; got {nf}")
    condlist = jnp.asarray(condlist, dtype=bool)
    dtype = x.dtype
    result = jnp.zeros_like(x)
    # index 0 is the default (no condition true); later conditions override earlier ones
    conds = [jnp.ones_like(x, dtype=bool)] + [condlist[i] for i in range(nc)]
    for cond, f in zip(conds, funclist):
        value = f(x, *args, **kw) if callable(f) else f
        result = jnp.where(cond, jnp.asarray(value).astype(dtype), result)
    return result
