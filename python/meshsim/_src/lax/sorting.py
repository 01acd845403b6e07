"""meshsim.lax: sort, sort_key_val and top_k."""
from __future__ import annotations

import operator
from collections.abc import Sequence

from meshsim._src import core
from meshsim._src.lax.structural import canonicalize_axis

__all__ = ["sort", "sort_key_val", "top_k"]


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sorts along `dimension`. A sequence of operands is sorted lexicographically by its
    first `num_keys` operands and returned as a tuple. NaNs sort last; the sort is stable."""
    single = not isinstance(operand, Sequence)
    operands = [core.asarray_value(o) for o in ([operand] if single else operand)]
    num_keys = operator.index(num_keys)
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"num_keys={num_keys} must be between 1 and len(operand)={len(operands)}")
    if operands[0].ndim == 0:
        raise TypeError("sort requires operands of rank at least 1")
    dim = canonicalize_axis(dimension, operands[0].ndim)
    out = core.bind("sort", *operands, dimension=dim, is_stable=bool(is_stable), num_keys=num_keys)
    return out[0] if single else tuple(out)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """Sorts `keys` along `dimension` and applies the same permutation to `values`."""
    return sort((keys, values), dimension=dimension, is_stable=is_stable, num_keys=1)


def top_k(operand, k: int, *, axis: int = -1):
    """The `k` largest elements along `axis` and their int32 indices (NaN counts as largest;
    ties go to the lower index)."""
    operand = core.asarray_value(operand)
    k = operator.index(k)
    if operand.ndim == 0:
        raise TypeError(f"top_k operand must have >= 1 dimension, got {core.typeof(operand)}")
    axis = canonicalize_axis(axis, operand.ndim)
    return core.bind("top_k", operand, k=k, axis=axis)
