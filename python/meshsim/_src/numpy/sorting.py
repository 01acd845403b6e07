"""meshsim.numpy: sort, argsort, lexsort, searchsorted, unique (on the sort/searchsorted primitives)."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src import core
from meshsim._src.lax import sorting as lax_sorting
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy.promotion import result_type

__all__ = ["sort", "argsort", "lexsort", "searchsorted", "unique"]


def _check_sort_args(fn: str, kind, order):
    if kind is not None:
        raise TypeError(f"'kind' argument to {fn} is not supported. Use stable=True or stable=False "
                        "to specify sort stability.")
    if order is not None:
        raise TypeError(f"'order' argument to {fn} is not supported.")


def _flat_or_axis(a, axis):
    a = core.asarray_value(a)
    if axis is None:
        return core.bind1("reshape", a, new_sizes=(a.size,), dimensions=None), 0
    if a.ndim == 0:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension 0")
    return a, axis


def _rev(x, dim):
    return core.bind1("rev", x, dimensions=(dim % x.ndim,))


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """Sorted copy along `axis` (flattened when None); NaNs last (first when descending)."""
    _check_sort_args("sort", kind, order)
    a, axis = _flat_or_axis(a, axis)
    out = lax_sorting.sort(a, dimension=axis, is_stable=stable)
    return _rev(out, axis) if descending else out


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """Indices that sort `a` along `axis`; ties keep their order (also when descending)."""
    _check_sort_args("argsort", kind, order)
    a, axis = _flat_or_axis(a, axis)
    index_dtype = core.canonicalize_dtype(np.int32 if dtype is None else dtype)
    if not np.issubdtype(index_dtype, np.integer):
        raise ValueError(f"argsort: dtype must be an integer type, got {index_dtype}")
    dim = canonicalize_axis(axis, a.ndim)
    iota = core.bind1("iota", dtype=index_dtype, shape=a.shape, dimension=dim)
    if descending:  # reverse, sort stably, reverse back: equal keys keep ascending indices
        _, idx = lax_sorting.sort((_rev(a, dim), _rev(iota, dim)), dimension=dim, is_stable=stable)
        return _rev(idx, dim)
    return lax_sorting.sort((a, iota), dimension=dim, is_stable=stable)[1]


def lexsort(keys, axis=-1):
    """Indices that sort by the last key, then the one before, ... (np.lexsort)."""
    keys = tuple(core.asarray_value(k) for k in keys)
    if len(keys) == 0:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if len({k.shape for k in keys}) > 1:
        raise ValueError("all keys need to be the same shape")
    if keys[0].ndim == 0:
        return core.asarray_value(np.int32(0))
    dim = canonicalize_axis(axis, keys[0].ndim)
    iota = core.bind1("iota", dtype=np.dtype(np.int32), shape=keys[0].shape, dimension=dim)
    return lax_sorting.sort((*keys[::-1], iota), dimension=dim, num_keys=len(keys))[-1]


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Insertion points (int32) of `v` into the sorted 1-D `a` that keep it sorted."""
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side'. Expected one of ['left', 'right'].")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ValueError(f"{method!r} is an invalid value for keyword 'method'. "
                         "Expected one of ['sort', 'scan', 'scan_unrolled', 'compare_all'].")
    a = core.asarray_value(a)
    if a.ndim != 1:
        raise ValueError("a should be 1-dimensional")
    if sorter is not None:
        from meshsim._src.numpy.indexing import take
        a = take(a, sorter)
    a, v = _promote_keep_shapes(a, v)
    return core.bind1("searchsorted", a, v, side=side)


def _promote_keep_shapes(*args):
    """Converts operands to one dtype without broadcasting them together."""
    dtype, _ = result_type(*args)
    return [core.convert_element_type(core.asarray_value(x), dtype) for x in args]


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):  # noqa: A002 (jnp's name)
    """np.unique of a concrete array (the output shape depends on the values); with `size`,
    the unique values are padded with fill_value (default: the smallest) or truncated."""
    ar = core.asarray_value(ar)
    if isinstance(ar, core.Tracer):
        raise TypeError(f"jnp.unique needs concrete values to know its output shape; got {core.typeof(ar)}.")
    host = np.asarray(ar)
    if axis is None:
        host = host.ravel()
    results = np.unique(host, return_index=True, return_inverse=True, return_counts=True, axis=axis,
                        equal_nan=equal_nan)
    values, index, inverse, counts = results
    if axis is None:
        inverse = inverse.reshape(ar.shape if ar.ndim else (1,))
    if size is not None:
        values, index, counts = _pad_unique(values, index, counts, operator.index(size), fill_value, axis)
    out = [core.asarray_value(values.astype(ar.dtype))]
    for want, arr in ((return_index, index), (return_inverse, inverse), (return_counts, counts)):
        if want:
            out.append(core.asarray_value(arr.astype(np.int32)))
    return out[0] if len(out) == 1 else tuple(out)


def _pad_unique(values, index, counts, size, fill_value, axis):
    ax = 0 if axis is None else axis
    n = values.shape[ax]
    if n >= size:
        return np.take(values, np.arange(size), ax), index[:size], counts[:size]
    fill = values.min() if fill_value is None and values.size else (0 if fill_value is None else fill_value)
    pad_shape = list(values.shape)
    pad_shape[ax] = size - n
    values = np.concatenate([values, np.full(pad_shape, fill, values.dtype)], ax)
    return values, np.pad(index, (0, size - n)), np.pad(counts, (0, size - n))
