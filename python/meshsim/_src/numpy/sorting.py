"""meshsim.numpy: sort, argsort, lexsort, searchsorted, unique (on the sort/searchsorted primitives)."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src import api
from meshsim._src import core
from meshsim._src.lax import sorting as lax_sorting
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy.promotion import promote_dtypes, promote_dtypes_inexact, result_type
from meshsim._src import dtype_kinds

__all__ = ["sort", "argsort", "lexsort", "searchsorted", "unique", "partition", "argpartition", "digitize",
           "histogram", "histogram_bin_edges", "interp", "sort_complex"]


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


@api.jitted_when_traced(static_argnames=('axis', 'kind', 'order', 'stable', 'descending'))
def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """Sorted copy along `axis` (flattened when None); NaNs last (first when descending)."""
    _check_sort_args("sort", kind, order)
    a, axis = _flat_or_axis(a, axis)
    out = lax_sorting.sort(a, dimension=axis, is_stable=stable)
    return _rev(out, axis) if descending else out


@api.jitted_when_traced
def sort_complex(a):
    """`a` sorted along its last axis (real part first, then imaginary), as complex."""
    from meshsim._src.lax.fft import _complex
    from meshsim._src.numpy.creation import _check_arraylike
    _check_arraylike("sort_complex", a)
    a = lax_sorting.sort(core.asarray_value(a))
    return core.convert_element_type(a, _complex(a.dtype))


@api.jitted_when_traced(static_argnames=('axis', 'kind', 'order', 'stable', 'descending', 'dtype'))
def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """Indices that sort `a` along `axis`; ties keep their order (also when descending)."""
    _check_sort_args("argsort", kind, order)
    a, axis = _flat_or_axis(a, axis)
    index_dtype = core.canonicalize_dtype(np.int32 if dtype is None else dtype)
    if not dtype_kinds.issubdtype(index_dtype, np.integer):
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


@api.jitted_when_traced(static_argnames=('side', 'method'))
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
    a, v = promote_dtypes(a, v)
    return core.bind1("searchsorted", a, v, side=side)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):  # noqa: A002 (jnp's name)
    """np.unique of a concrete array (the output shape depends on the values); with `size`,
    the unique values are padded with fill_value (default: the smallest) or truncated."""
    ar = core.asarray_value(ar)
    if size is not None and axis is None:
        # JAX's algorithm (sort, mark run starts, gather size of them) works under jit too
        result = _unique_sized(ar, return_index, return_inverse, return_counts, equal_nan,
                               operator.index(size), fill_value)
        if return_inverse:
            i = 2 if return_index else 1
            result = (*result[:i], result[i].reshape(ar.shape), *result[i + 1:])
        return result
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


def _unique_sized(ar, return_index, return_inverse, return_counts, equal_nan, size, fill_value,
                  return_true_size=False):
    """JAX's unique of a flattened array with a static `size`, traceable: sort, mark the
    first of each run of equal values, and gather the marks' positions (nonzero(size=))."""
    from meshsim._src.numpy import namespace as jnp
    ar = jnp.ravel(ar)
    if ar.shape[0] == 0 and size and fill_value is None:
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    perm = argsort(ar, stable=True)
    aux = ar[perm]
    if aux.size:
        neq = aux[1:] != aux[:-1]
        if equal_nan and dtype_kinds.issubdtype(aux.dtype, np.inexact):
            neq = neq & ~(jnp.isnan(aux[1:]) & jnp.isnan(aux[:-1]))
        mask = jnp.concatenate([jnp.ones(1, bool), neq])
    else:
        mask = jnp.zeros(0, bool)
    ind = jnp.nonzero(mask, size=size)[0]
    result = aux[ind] if aux.size else aux
    if fill_value is not None:
        fill = jnp.asarray(fill_value).astype(result.dtype)
        if result.shape[0]:
            result = jnp.where(jnp.arange(size) < mask.sum(), result, fill)
        else:
            result = jnp.full_like(result, fill, shape=(size,))
    out = [result]
    if return_index:
        out.append(perm[ind] if aux.size else perm)
    if return_inverse:
        if aux.size:
            out.append(jnp.zeros(mask.shape, dtype=int).at[perm].set(jnp.cumsum(mask) - 1))
        else:
            out.append(jnp.zeros(0, dtype=int))
    if return_counts:
        if aux.size:
            idx = jnp.nonzero(mask, size=size + 1)[0]
            idx = idx.at[1:].set(jnp.where(idx[1:], idx[1:], mask.size))
            out.append(jnp.diff(idx))
        else:
            out.append(jnp.zeros(0, dtype=int))
    if return_true_size:
        out.append(mask.sum())
    return out[0] if len(out) == 1 else tuple(out)


# --- partitions --------------------------------------------------------------------------

def _bottom_k(arr, k: int):
    """top_k of the negated values: the k smallest, ascending (unsigned values shifted so 0 negates)."""
    from meshsim._src.numpy import namespace as jnp
    if dtype_kinds.issubdtype(arr.dtype, np.unsignedinteger):
        values, ind = lax_sorting.top_k(-(arr + 1), k)
        return -values - 1, ind
    values, ind = lax_sorting.top_k(jnp.negative(arr), k)
    return jnp.negative(values), ind


def _partition_args(a, kth: int, axis: int):
    """a with `axis` moved last, and kth and axis canonicalised."""
    from meshsim._src.numpy import namespace as jnp
    arr = core.asarray_value(a)
    axis = canonicalize_axis(axis, arr.ndim)
    kth = canonicalize_axis(kth, arr.shape[axis])
    return jnp.swapaxes(arr, axis, -1), kth, axis


def partition(a, kth: int, axis: int = -1):
    """a with the kth-smallest element at index kth along axis, smaller ones before, larger after."""
    from meshsim._src.numpy import namespace as jnp
    arr, kth, axis = _partition_args(a, kth, axis)
    bottom, _ = _bottom_k(arr, kth + 1)
    top = lax_sorting.top_k(arr, arr.shape[-1] - kth - 1)[0]
    return jnp.swapaxes(jnp.concatenate([bottom, top], axis=-1), -1, axis)


def argpartition(a, kth: int, axis: int = -1):
    """Indices that partition a around its kth-smallest element along axis."""
    from meshsim._src.numpy import namespace as jnp
    arr, kth, axis = _partition_args(a, kth, axis)
    _, bottom_ind = _bottom_k(arr, kth + 1)
    # the rest: top_k of a proxy that is 0 at the chosen positions (duplicates stay distinct)
    chosen = jnp.any(bottom_ind[..., :, None] == jnp.arange(arr.shape[-1]), axis=-2)
    proxy = jnp.where(chosen, 0.0, 1.0).astype(np.float32)
    top_ind = lax_sorting.top_k(proxy, arr.shape[-1] - kth - 1)[1]
    return jnp.swapaxes(jnp.concatenate([bottom_ind, top_ind], axis=-1), -1, axis)


# --- binning and interpolation (searchsorted) ------------------------------------------------

def digitize(x, bins, right: bool = False, *, method=None):
    """The index of the bin of each x (bins increasing or decreasing)."""
    from meshsim._src.numpy import namespace as jnp
    x, bins = core.asarray_value(x), core.asarray_value(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    if bins.shape[0] == 0:
        return jnp.zeros_like(x, dtype=np.int32)
    side = "right" if not right else "left"
    kwds = {} if method is None else {"method": method}
    return jnp.where(bins[-1] >= bins[0], searchsorted(bins, x, side=side, **kwds),
                     bins.shape[0] - searchsorted(bins[::-1], x, side=side, **kwds))


def histogram_bin_edges(a, bins=10, range=None, weights=None):  # noqa: A002 (NumPy's name)
    """The edges of `bins` equal bins over range (default: a's min to max)."""
    from meshsim._src.numpy import namespace as jnp
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` not implemented.")
    arr = core.asarray_value(a)
    dtype = arr.dtype if dtype_kinds.issubdtype(arr.dtype, np.floating) else core.canonicalize_dtype(np.float64)
    if np.ndim(bins) == 1:
        return jnp.asarray(bins, dtype=dtype)
    bins = operator.index(bins)
    if bins < 0:  # NumPy's error (JAX fails inside with an IndexError)
        raise ValueError("`bins` must be positive, when an integer")
    if range is None:
        range = [jnp.min(arr), jnp.max(arr)]  # noqa: A001
    range = jnp.asarray(range, dtype=dtype)  # noqa: A001
    if range.shape != (2,):
        raise ValueError(f"`range` must be either None or a sequence of scalars, got {range}")
    empty = jnp.ptp(range) == 0
    lo = jnp.where(empty, range[0] - 0.5, range[0])
    hi = jnp.where(empty, range[1] + 0.5, range[1])
    return jnp.linspace(lo, hi, bins + 1, dtype=dtype)


def histogram(a, bins=10, range=None, weights=None, density=None):  # noqa: A002 (NumPy's name)
    """(counts or summed weights per bin, bin edges); the last bin includes its right edge."""
    from meshsim._src.numpy import namespace as jnp
    if weights is None:
        (a,) = promote_dtypes_inexact(core.asarray_value(a))
        weights = jnp.ones_like(a)
    else:
        if np.shape(a) != np.shape(weights):
            raise ValueError("weights should have the same shape as a.")
        a, weights = promote_dtypes_inexact(core.asarray_value(a), core.asarray_value(weights))
    bin_edges = histogram_bin_edges(a, bins, range, weights)
    bin_idx = searchsorted(bin_edges, a, side="right")
    bin_idx = jnp.where(a == bin_edges[-1], len(bin_edges) - 1, bin_idx)
    counts = jnp.zeros(len(bin_edges), weights.dtype).at[bin_idx].add(weights)[1:]
    if density:
        counts = counts / jnp.diff(bin_edges) / counts.sum()
    return counts, bin_edges


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) at x."""
    from meshsim._src.numpy import namespace as jnp
    x, xp, fp = (core.asarray_value(v) for v in (x, xp, fp))
    if xp.shape != fp.shape or xp.ndim != 1:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    x, xp = promote_dtypes_inexact(x, xp)
    (fp,) = promote_dtypes_inexact(fp)
    for name, value in (("left", left), ("right", right)):
        if isinstance(value, str) and value != "extrapolate":
            raise ValueError(f"the only valid string value of `{name}` is 'extrapolate', but got: {value!r}")
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"period must be a scalar; got {period}")
        period = jnp.abs(period)
        x, xp = x % period, xp % period
        xp, fp = lax_sorting.sort_key_val(xp, fp)
        xp = jnp.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = jnp.concatenate([fp[-1:], fp, fp[:1]])
    i = jnp.clip(searchsorted(xp, x, side="right"), 1, len(xp) - 1)
    df = fp[i] - fp[i - 1]
    dx = xp[i] - xp[i - 1]
    delta = x - xp[i - 1]
    dx0 = jnp.abs(dx) <= np.spacing(dtype_kinds.finfo(xp.dtype).eps)  # no NaN from a zero-width segment
    f = jnp.where(dx0, fp[i - 1], fp[i - 1] + (delta / jnp.where(dx0, 1, dx)) * df)
    if period is None and not isinstance(left, str):
        f = jnp.where(x < xp[0], fp[0] if left is None else left, f)
    if period is None and not isinstance(right, str):
        f = jnp.where(x > xp[-1], fp[-1] if right is None else right, f)
    return f
