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


def dynamic_slice(operand, start_indices, slice_sizes):
    """operand[start:start+size] per dimension with traced starts: negative starts count from
    the end, then each start is clamped so the slice fits (XLA's rule)."""
    operand = core.asarray_value(operand)
    starts = _start_indices("dynamic_slice", operand, start_indices)
    return core.bind1("dynamic_slice", operand, *starts,
                      slice_sizes=tuple(operator.index(s) for s in slice_sizes))


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
    starts = _start_indices("dynamic_update_slice", operand, start_indices)
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


# The gather/scatter forms below are meshsim's own (JAX's take XLA dimension
# numbers); see cpp/meshsim/primitives/indexing.cpp for their semantics.

def gather(operand, indices, axes, index_dims_at: int, mode: str = "clip", fill_value=None,
           batch_axes=(), out_sharding=None):
    """operand indexed on `axes` by the integer arrays `indices` (one shape B); B's dims go at
    position `index_dims_at` among the operand's remaining dims. `batch_axes` (take_along_axis:
    axes=all dims, index_dims_at=0) names the operand dims whose index array is an arange along
    B's same dim, JAX's batching dims: their sharding carries over to the result."""
    extra = {"batch_axes": tuple(batch_axes)} if batch_axes else {}
    if out_sharding is not None:
        extra["out_sharding"] = explicit.out_sharding_param(
            out_sharding, len(indices[0].shape) + core.asarray_value(operand).ndim - len(axes))
    return core.bind1("gather", operand, *indices, axes=tuple(axes), index_dims_at=index_dims_at,
                      mode=mode, fill_value=fill_value, **extra)


def scatter(kind: str, operand, updates, indices, axes, index_dims_at: int, mode: str = "drop",
            batch_axes=()):
    """kind in scatter, scatter_add, scatter_mul, scatter_min, scatter_max; `updates` has the
    shape the matching gather would return; `batch_axes` as for gather."""
    extra = {"batch_axes": tuple(batch_axes)} if batch_axes else {}
    return core.bind1(kind, operand, updates, *indices, axes=tuple(axes), index_dims_at=index_dims_at,
                      mode=mode, **extra)
