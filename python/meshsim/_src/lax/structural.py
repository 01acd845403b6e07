"""meshsim.lax: shape and layout operations and value creation (as jax.lax).

Each wrapper canonicalises its static arguments (shapes, axes) to tuples of
Python ints and binds one primitive; the C++ shape rules check the rest."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from meshsim import _core
from meshsim._src import core, tracing, tree_util
from meshsim._src.lax.elementwise import bind_suggesting_promotion
from meshsim._src.sharding import explicit

__all__ = [
    "broadcast_in_dim", "broadcast", "broadcast_to_rank", "reshape", "transpose", "squeeze",
    "expand_dims", "collapse", "concatenate", "pad", "slice", "slice_in_dim", "index_in_dim", "rev",
    "copy", "iota", "broadcasted_iota", "full", "full_like", "split", "stack", "unstack", "tile",
    "broadcast_shapes", "broadcast_like", "optimization_barrier", "empty",
]


def canonicalize_shape(shape, context: str = "") -> tuple[int, ...]:
    """A user-given shape as a tuple of ints (an int is a 1-d shape)."""
    if isinstance(shape, (int, np.integer)) or (isinstance(shape, core.Tracer) and not shape.shape):
        shape = (shape,)
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        pass
    msg = f"Shapes must be 1D sequences of concrete values of integer type, got {shape}."
    if context:
        msg = f"{msg} {context}."
    tracers = [d for d in (shape if isinstance(shape, (tuple, list)) else ()) if isinstance(d, core.Tracer)]
    if tracers:
        msg += "\nIf using `jit`, try using `static_argnums` or applying `jit` to smaller subfunctions."
        msg += "".join(tracing.origin_message(d) for d in tracers)
    raise TypeError(msg)


def canonicalize_axis(axis, ndim: int) -> int:
    """A possibly negative axis as an index in [0, ndim), or NumPy's AxisError
    ("axis 2 is out of bounds for array of dimension 2"). AxisError is both a
    ValueError and an IndexError: JAX raises one or the other depending on the
    function (ValueError from jnp.sum, IndexError from jnp.mean or jnp.split)."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim if ndim else axis


def _check_nonnegative(shape, what: str):
    if any(d < 0 for d in shape):
        raise TypeError(f"{what} must have every element be nonnegative, got {shape}.")


def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
    operand = core.asarray_value(operand)
    shape = canonicalize_shape(shape)
    _check_nonnegative(shape, "broadcast_in_dim shape")
    dims = tuple(operator.index(d) for d in broadcast_dimensions)
    if operand.shape == shape and dims == tuple(range(len(shape))):
        out = operand
    elif out_sharding is not None and operand.aval.mesh is not None:
        # The result laid out as asked by the broadcast itself (JAX's `sharding` param).
        explicit.check_explicit_axes(out_sharding, "broadcast_in_dim")
        explicit.NamedSharding(*explicit.resolve(out_sharding, "out_sharding")).check_type_divisibility(shape)
        return core.bind1("broadcast_in_dim", operand, shape=shape, broadcast_dimensions=dims,
                          out_sharding=explicit.out_sharding_param(out_sharding, len(shape)))
    else:
        out = core.bind1("broadcast_in_dim", operand, shape=shape, broadcast_dimensions=dims)
    return explicit.with_out_sharding(out, out_sharding)


def broadcast(operand, sizes, *, out_sharding=None):
    """Adds leading dimensions of `sizes`."""
    operand = core.asarray_value(operand)
    sizes = canonicalize_shape(sizes)
    dims = tuple(range(len(sizes), len(sizes) + operand.ndim))
    return broadcast_in_dim(operand, sizes + operand.shape, dims, out_sharding=out_sharding)


def broadcast_to_rank(x, rank: int):
    """Adds leading unit dimensions up to `rank`."""
    x = core.asarray_value(x)
    if x.ndim >= rank:
        return x
    return broadcast(x, (1,) * (rank - x.ndim))


def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    """Row-major reshape, after transposing by `dimensions` when given."""
    operand = core.asarray_value(operand)
    new_sizes = canonicalize_shape(new_sizes)
    _check_nonnegative(new_sizes, "reshape new_sizes")
    explicit.check_explicit_axes(out_sharding, "reshape")
    if dimensions is not None and tuple(dimensions) != tuple(range(operand.ndim)):
        operand = transpose(operand, dimensions)
    if operand.shape == new_sizes:
        return explicit.with_out_sharding(operand, out_sharding)
    if out_sharding is not None and operand.aval.mesh is not None:
        explicit.NamedSharding(*explicit.resolve(out_sharding, "out_sharding")).check_type_divisibility(
            new_sizes)
        return core.bind1("reshape", operand, new_sizes=new_sizes,
                          out_sharding=explicit.out_sharding_param(out_sharding, len(new_sizes)))
    return explicit.with_out_sharding(core.bind1("reshape", operand, new_sizes=new_sizes),
                                      out_sharding)


def transpose(operand, permutation):
    operand = core.asarray_value(operand)
    permutation = tuple(operator.index(p) for p in permutation)
    if permutation == tuple(range(operand.ndim)):
        return operand
    return core.bind1("transpose", operand, permutation=permutation)


def squeeze(array, dimensions):
    """Removes the size-1 `dimensions` (negative values count from the end)."""
    array = core.asarray_value(array)
    dims = tuple(sorted(canonicalize_axis(d, array.ndim) for d in dimensions))
    if not dims:
        return array
    return core.bind1("squeeze", array, dimensions=dims)


def expand_dims(array, dimensions):
    """Inserts size-1 dimensions at `dimensions` of the result (a broadcast_in_dim)."""
    array = core.asarray_value(array)
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"repeated axis in lax.expand_dims: {tuple(dimensions)}")
    ndim_out = array.ndim + len(dimensions)
    dims = {canonicalize_axis(d, ndim_out) for d in dimensions}
    if len(dims) != len(dimensions):
        raise ValueError(f"repeated axis in lax.expand_dims: {sorted(dims)}")
    shape = list(array.shape)
    for d in sorted(dims):
        shape.insert(d, 1)
    kept = tuple(i for i in range(ndim_out) if i not in dims)
    return broadcast_in_dim(array, shape, kept)


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """Merges dimensions [start_dimension, stop_dimension) into one."""
    operand = core.asarray_value(operand)
    lo, hi, _ = builtins.slice(start_dimension, stop_dimension).indices(operand.ndim)
    if hi < lo:
        raise ValueError(f"Invalid dimension range passed to collapse: {operand.shape}"
                         f"[{start_dimension}:{stop_dimension}]")
    size = int(np.prod(operand.shape[lo:hi]))
    return reshape(operand, operand.shape[:lo] + (size,) + operand.shape[hi:])


def concatenate(operands, dimension: int):
    if len(operands) == 0:
        raise ValueError("concatenate requires a non-empty sequences of arrays")
    operands = [core.asarray_value(x) for x in operands]
    if len(operands) == 1:
        return operands[0]
    return bind_suggesting_promotion("concatenate", *operands, dimension=operator.index(dimension))


def pad(operand, padding_value, padding_config):
    """Pads with (low, high, interior) per dimension; negative low/high crop."""
    config = tuple(tuple(operator.index(v) for v in c) for c in padding_config)
    return core.bind1("pad", core.asarray_value(operand), core.asarray_value(padding_value),
                      padding_config=config)


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001 (jax.lax.slice)
    return core.bind1("slice", core.asarray_value(operand),
                      start_indices=canonicalize_shape(start_indices),
                      limit_indices=canonicalize_shape(limit_indices),
                      strides=None if strides is None else canonicalize_shape(strides))


def slice_in_dim(operand, start_index, limit_index, stride: int = 1, axis: int = 0):
    """slice along one axis; None and negative indices as in Python slicing."""
    operand = core.asarray_value(operand)
    n = operand.shape[axis]
    start = 0 if start_index is None else operator.index(start_index)
    limit = n if limit_index is None else operator.index(limit_index)
    start, limit = start + n if start < 0 else start, limit + n if limit < 0 else limit
    starts, limits, strides = [0] * operand.ndim, list(operand.shape), [1] * operand.ndim
    starts[axis], limits[axis], strides[axis] = start, limit, operator.index(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """Element `index` along `axis`, keeping that axis as size 1 if `keepdims`."""
    operand = core.asarray_value(operand)
    n = operand.shape[axis]
    index = operator.index(index)
    if not -n <= index < n:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {n}")
    index %= n
    result = slice_in_dim(operand, index, index + 1, 1, axis)
    return result if keepdims else squeeze(result, (axis,))


def rev(operand, dimensions):
    return core.bind1("rev", core.asarray_value(operand),
                      dimensions=tuple(operator.index(d) for d in dimensions))


def copy(x):
    """A copy of `x` in a fresh buffer (JAX's copy_p)."""
    return core.bind1("copy", core.asarray_value(x))


def broadcasted_iota(dtype, shape, dimension: int, *, out_sharding=None):
    """Values 0, 1, ... along `dimension`, constant along the others."""
    shape = canonicalize_shape(shape)
    _check_nonnegative(shape, "broadcasted_iota shape")
    return core.bind1("iota", dtype=core.canonicalize_dtype(dtype), shape=shape,
                      dimension=operator.index(dimension))


def iota(dtype, size: int):
    return broadcasted_iota(dtype, (size,), 0)


def full(shape, fill_value, dtype=None, *, sharding=None):
    """`fill_value` broadcast to `shape`; weakly typed if `fill_value` is and no dtype is given."""
    shape = canonicalize_shape(shape)
    if np.shape(fill_value):
        raise TypeError("full must be called with scalar fill_value, got fill_value.shape "
                        f"{np.shape(fill_value)}.")
    weak = False
    if dtype is None and core.is_python_scalar(fill_value):
        dtype, weak = core.python_scalar_dtype(fill_value), not isinstance(fill_value, bool)
    if dtype is None:
        value = core.asarray_value(fill_value)
    else:  # a Python int wraps around, as in JAX: full((2,), 2**31) is int32 -2**31
        value = core.convert_element_type(fill_value, dtype, weak)
    return broadcast(value, shape)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """full with the shape and dtype (and weak type) of `x` unless given."""
    x_type = core.typeof(x)
    fill_shape = x_type.shape if shape is None else canonicalize_shape(shape)
    weak = dtype is None and x_type.weak_type
    value = core.convert_element_type(fill_value, x_type.dtype if dtype is None else dtype, weak)
    # Inside shard_map the result varies over the axes `x` does, as in JAX.
    if x_type.vma:
        return _core.vary_over(broadcast(value, fill_shape), sorted(x_type.vma))
    out = broadcast(value, fill_shape)
    aval = getattr(x, "aval", None)
    if sharding is None and shape is None and isinstance(x, core.Tracer) and aval is not None \
            and aval.mesh is not None and any(aval.spec):
        # A traced `x` lends the result its type's sharding, as in JAX (Explicit axes).
        out = core.bind1("reshard", out, mesh=aval.mesh, spec=[list(e) for e in aval.spec])
    return out


def split(operand, sizes, axis: int = 0):
    """`operand` cut along `axis` into consecutive pieces of the given sizes."""
    operand = core.asarray_value(operand)
    axis = canonicalize_axis(axis, operand.ndim)
    sizes = canonicalize_shape(sizes)
    _check_nonnegative(sizes, "split sizes")
    if builtins.sum(sizes) != operand.shape[axis]:
        raise ValueError(f"Sum of sizes {builtins.sum(sizes)} must be equal to dimension {axis} of the "
                         f"operand shape {operand.shape}")
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [slice_in_dim(operand, int(a), int(b), axis=axis) for a, b in zip(starts[:-1], starts[1:])]


def stack(operands, axis: int = 0):
    """The operands (of one shape and dtype) as the slices of a new dimension `axis`."""
    operands = [core.asarray_value(x) for x in operands]
    axis = canonicalize_axis(axis, operands[0].ndim + 1)
    return core.bind1("stack", *operands, axis=axis)


def unstack(x, axis: int = 0):
    """The slices of `x` along `axis`, as a tuple."""
    x = core.asarray_value(x)
    axis = canonicalize_axis(axis, x.ndim)
    return tuple(core.bind("unstack", x, axis=axis))


def tile(operand, reps):
    """`operand` repeated `reps[d]` times along each dimension d."""
    operand = core.asarray_value(operand)
    reps = canonicalize_shape(reps)
    if len(reps) != operand.ndim:
        raise ValueError(f"len(reps) must equal operand.ndim, got reps={reps} for operand shape "
                         f"{operand.shape}")
    # broadcast to [r0, n0, r1, n1, ...] then merge each pair
    shape = tuple(d for r, n in zip(reps, operand.shape) for d in (r, n))
    dims = tuple(range(1, 2 * operand.ndim, 2))
    tiled = broadcast_in_dim(operand, shape, dims)
    return reshape(tiled, tuple(r * n for r, n in zip(reps, operand.shape)))


def broadcast_shapes(*shapes):
    """The NumPy-style broadcast of the shapes, as a tuple."""
    shapes = [canonicalize_shape(s) for s in shapes]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={shapes}") from None


def broadcast_like(arr, like_arr):
    """`arr` broadcast (NumPy rules, leading dimensions added) to the shape of `like_arr`."""
    arr = core.asarray_value(arr)
    shape = core.typeof(like_arr).shape
    return broadcast_in_dim(arr, shape, tuple(range(len(shape) - arr.ndim, len(shape))))


def optimization_barrier(operand, /):
    """Its argument (a pytree) unchanged, as new values: whatever reads a result
    keeps every leaf computed, as XLA keeps what goes into a barrier."""
    leaves, tree = tree_util.tree_flatten(operand)
    if not leaves:
        return operand
    outs = core.bind("optimization_barrier", *(core.asarray_value(x) for x in leaves))
    return tree_util.tree_unflatten(tree, list(outs))


def empty(shape, dtype, *, out_sharding=None):
    """An array of `shape` and `dtype` (zeros here; JAX leaves the values unspecified)."""
    return full(shape, 0, dtype, sharding=out_sharding)
