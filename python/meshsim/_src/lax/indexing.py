"""meshsim.lax: dynamic slices, and the gather/scatter forms the numpy layer lowers to."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src import core
from meshsim._src import dtype_kinds
from meshsim._src.sharding import explicit

__all__ = ["dynamic_slice", "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim"]


def _start_indices(prim: str, operand, start_indices):
    """Start indices as integer scalar values, one per operand dimension."""
    if core.is_value(start_indices) or isinstance(start_indices, np.ndarray):
        start_indices = [start_indices[i] for i in range(start_indices.shape[0])] if np.ndim(start_indices) else [start_indices]
    starts = [core.asarray_value(s) for s in start_indices]
    if len(starts) != operand.ndim:
        raise TypeError(f"{prim} start_indices must have length equal to the number of dimensions of the "
                        f"operand, got indices {tuple(s.shape for s in starts)} for operand of shape "
                        f"{operand.shape}")
    for s in starts:
        if s.ndim != 0 or not dtype_kinds.issubdtype(s.dtype, np.integer):
            raise TypeError(f"{prim} start indices must be integer scalars, got {core.typeof(s)}")
    return starts


def normalize_index(index, size: int):
    """An index in [-size, size) moved to [0, size), as JAX writes it before a gather, scatter or
    dynamic slice: Python and NumPy integer scalars statically, NumPy arrays with their sign
    test computed here, arrays as the equations `select_n(lt(i, 0), i, add(i, size))`;
    unsigned indices are left alone."""
    if isinstance(index, (int, np.integer)):
        return index + size if index < 0 else index
    dtype = np.dtype(index.dtype)
    if dtype_kinds.issubdtype(dtype, np.unsignedinteger):
        return index
    size_value = core.asarray_value(np.asarray(size, dtype))
    if isinstance(index, np.ndarray):
        negative = core.asarray_value(index < 0)
    else:
        negative = core.bind1("lt", index, core.asarray_value(np.asarray(0, dtype)))
    index = core.asarray_value(index)
    return core.bind1("select_n", negative, index, core.bind1("add", index, size_value))


def _normalized_starts(operand, starts):
    """JAX's start normalisation for dynamic slices (static starts stay literals)."""
    out = []
    for start, size in zip(starts, operand.shape):
        if isinstance(start, (int, np.integer)):
            out.append(core.asarray_value(normalize_index(start, size)))
        else:
            out.append(normalize_index(core.asarray_value(start), size))
    return out


def dynamic_slice(operand, start_indices, slice_sizes):
    """operand[start:start+size] per dimension with traced starts: negative starts count from
    the end (normalised by equations, as JAX), then each start is clamped so the slice fits
    (XLA's rule)."""
    operand = core.asarray_value(operand)
    _start_indices("dynamic_slice", operand, start_indices)
    starts = _normalized_starts(operand, _raw_starts(start_indices))
    return core.bind1("dynamic_slice", operand, *starts,
                      slice_sizes=tuple(operator.index(s) for s in slice_sizes))


def _raw_starts(start_indices):
    """The start indices as given, one per dimension (Python ints kept, for static normalisation)."""
    if core.is_value(start_indices) or isinstance(start_indices, np.ndarray):
        if not np.ndim(start_indices):
            return [start_indices]
        return [start_indices[i] for i in range(start_indices.shape[0])]
    return list(start_indices)


def dynamic_slice_in_dim(operand, start_index, slice_size: int = 1, axis: int = 0):
    operand = core.asarray_value(operand)
    axis = _axis(axis, operand.ndim)
    starts = [0] * operand.ndim
    starts[axis] = start_index
    sizes = list(operand.shape)
    sizes[axis] = slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    operand = core.asarray_value(operand)
    axis = _axis(axis, operand.ndim)
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else core.bind1("squeeze", out, dimensions=(axis,))


def dynamic_update_slice(operand, update, start_indices):
    """operand with `update` written at start_indices (negative starts count from the end, then
    each is clamped so that the update fits)."""
    operand, update = core.asarray_value(operand), core.asarray_value(update)
    _start_indices("dynamic_update_slice", operand, start_indices)
    starts = _normalized_starts(operand, _raw_starts(start_indices))
    return core.bind1("dynamic_update_slice", operand, update, *starts)


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int):
    operand = core.asarray_value(operand)
    axis = _axis(axis, operand.ndim)
    starts = [0] * operand.ndim
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis: int):
    operand, update = core.asarray_value(operand), core.asarray_value(update)
    axis = _axis(axis, operand.ndim)
    if update.ndim == operand.ndim - 1:
        shape = update.shape[:axis] + (1,) + update.shape[axis:]
        update = core.bind1("reshape", update, new_sizes=shape, dimensions=None)
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def _axis(axis: int, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


# Gathers and scatters in JAX's form (XLA's dimension numbers, one indices array whose last dim
# holds the index vectors; cpp/meshsim/primitives/indexing_jax_form.h), which is how jnp indexing
# and lax.gather/scatter bind them when the numbers take whole dims or single elements, and
# meshsim's own point-wise form (indexing_common.h) that the others lower to.

JAX_MODES = ("promise_in_bounds", "clip", "fill_or_drop")


def default_fill_value(dtype):
    """The value a FILL_OR_DROP gather reads out of bounds when none is given (JAX's)."""
    dtype = np.dtype(dtype)
    if dtype_kinds.issubdtype(dtype, np.inexact):
        return np.nan
    if dtype == np.bool_:
        return True
    if dtype_kinds.issubdtype(dtype, np.signedinteger):
        return int(dtype_kinds.iinfo(dtype).min)
    return int(dtype_kinds.iinfo(dtype).max)


def gather_in_jax_form(operand, indices, dimension_numbers, slice_sizes, mode: str, fill_value=None,
                       indices_are_sorted: bool = False, unique_indices: bool = False):
    """`gather` with JAX's parameters: `dimension_numbers` the five tuples of
    GatherDimensionNumbers, `mode` one of JAX_MODES (a FILL_OR_DROP gather's fill value made
    explicit, as JAX's is)."""
    operand = core.asarray_value(operand)
    if mode == "fill_or_drop":
        if fill_value is None:
            fill_value = default_fill_value(operand.dtype)
    else:
        fill_value = None
    return core.bind1("gather", operand, core.asarray_value(indices),
                      dimension_numbers=tuple(tuple(int(d) for d in dims) for dims in dimension_numbers),
                      slice_sizes=tuple(int(n) for n in slice_sizes), mode=mode, fill_value=fill_value,
                      indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices))


def scatter_in_jax_form(kind: str, operand, indices, updates, dimension_numbers, mode: str,
                        indices_are_sorted: bool = False, unique_indices: bool = False):
    """`kind` (scatter, scatter_add/mul/min/max) with JAX's parameters and operand order
    (operand, indices, updates)."""
    return core.bind1(kind, core.asarray_value(operand), core.asarray_value(indices),
                      core.asarray_value(updates),
                      dimension_numbers=tuple(tuple(int(d) for d in dims) for dims in dimension_numbers),
                      mode=mode, indices_are_sorted=bool(indices_are_sorted),
                      unique_indices=bool(unique_indices))

def gather(operand, indices, axes, index_dims_at: int, mode: str = "clip", fill_value=None,
           batch_axes=(), out_sharding=None):
    """operand indexed on `axes` by the integer arrays `indices` (one shape B); B's dims go at
    position `index_dims_at` among the operand's remaining dims. `batch_axes` (take_along_axis:
    axes=all dims, index_dims_at=0) names the operand dims whose index array is an arange along
    B's same dim, JAX's batching dims: their sharding carries over to the result."""
    extra = {"batch_axes": tuple(batch_axes)} if batch_axes else {}
    if out_sharding is not None:
        rest = [n for d, n in enumerate(core.asarray_value(operand).shape) if d not in axes]
        explicit.check_out_divisible(
            out_sharding, (*rest[:index_dims_at], *indices[0].shape, *rest[index_dims_at:]))
        extra["out_sharding"] = explicit.out_sharding_param(out_sharding, len(rest) + len(indices[0].shape))
    return core.bind1("gather", operand, *indices, axes=tuple(axes), index_dims_at=index_dims_at,
                      mode=mode, fill_value=fill_value, **extra)


def scatter(kind: str, operand, updates, indices, axes, index_dims_at: int, mode: str = "drop",
            batch_axes=(), out_sharding=None):
    """kind in scatter, scatter_add, scatter_mul, scatter_min, scatter_max; `updates` has the
    shape the matching gather would return; `batch_axes` and `out_sharding` as for gather."""
    extra = {"batch_axes": tuple(batch_axes)} if batch_axes else {}
    if out_sharding is not None:
        extra["out_sharding"] = explicit.out_sharding_param(out_sharding, core.asarray_value(operand).ndim)
    return core.bind1(kind, operand, updates, *indices, axes=tuple(axes), index_dims_at=index_dims_at,
                      mode=mode, **extra)
