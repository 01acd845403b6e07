"""meshsim.ops: segment reductions (as jax.ops), each one scatter into the segments."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src import core
from meshsim._src.lax import indexing as lax_indexing
from meshsim._src.numpy.promotion import broadcast_to_shape
from meshsim._src import dtype_kinds

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _segment_reduce(name: str, scatter_kind: str, identity, data, segment_ids, num_segments, mode):
    data, ids = core.asarray_value(data), core.asarray_value(segment_ids)
    if not dtype_kinds.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"{name}: segment_ids must have an integer type, got {ids.dtype}")
    if data.ndim == 0 or ids.shape != data.shape[:ids.ndim] or ids.ndim != 1:
        raise ValueError(f"{name}: segment_ids of shape {ids.shape} must be 1-D and match the leading "
                         f"dimension of data of shape {data.shape}")
    if num_segments is None:
        if isinstance(ids, core.Tracer):
            raise TypeError(f"{name} needs concrete segment_ids to know num_segments; got "
                            f"{core.typeof(ids)}. Pass a static `num_segments=` to use it inside jit.")
        num_segments = int(np.asarray(ids).max()) + 1 if ids.size else 0
    num_segments = operator.index(num_segments)
    if mode not in (None, "drop", "fill", "promise_in_bounds", "clip"):
        raise ValueError(f"{name}: invalid mode {mode!r}")
    out_shape = (num_segments,) + data.shape[1:]
    init = broadcast_to_shape(core.convert_element_type(core.asarray_value(identity(data.dtype)), data.dtype),
                              out_shape)
    if mode != "clip":
        ids = _negative_to_out_of_range(ids, num_segments)  # dropped, not counted from the end
    return lax_indexing.scatter(scatter_kind, init, data, [ids], (0,), 0, "clip" if mode == "clip" else "drop")


def _negative_to_out_of_range(ids, n):
    zero = broadcast_to_shape(core.convert_element_type(core.asarray_value(0), ids.dtype), ids.shape)
    big = broadcast_to_shape(core.convert_element_type(core.asarray_value(n), ids.dtype), ids.shape)
    return core.bind1("select_n", core.bind1("lt", ids, zero), ids, big)


def _lowest(dtype):
    return -np.inf if dtype_kinds.issubdtype(dtype, np.floating) else (
        False if dtype == np.bool_ else np.iinfo(dtype).min)


def _highest(dtype):
    return np.inf if dtype_kinds.issubdtype(dtype, np.floating) else (
        True if dtype == np.bool_ else np.iinfo(dtype).max)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None):
    """Sums of data's rows per segment id; ids outside [0, num_segments) are dropped."""
    return _segment_reduce("segment_sum", "scatter_add", lambda dt: 0, data, segment_ids, num_segments, mode)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                 bucket_size=None, mode=None):
    return _segment_reduce("segment_prod", "scatter_mul", lambda dt: 1, data, segment_ids, num_segments, mode)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None):
    """Maxima per segment; empty segments hold the dtype's lowest value (-inf for floats)."""
    return _segment_reduce("segment_max", "scatter_max", _lowest, data, segment_ids, num_segments, mode)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None):
    """Minima per segment; empty segments hold the dtype's highest value (inf for floats)."""
    return _segment_reduce("segment_min", "scatter_min", _highest, data, segment_ids, num_segments, mode)
