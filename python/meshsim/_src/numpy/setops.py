"""meshsim.numpy: set operations on 1-D arrays — isin, union1d, intersect1d, setdiff1d,
setxor1d and the unique_* family (as jax.numpy).

Built on sort and unique. Results whose size depends on the data need concrete
inputs, or `size=` (and `fill_value=`) under jit, as in JAX."""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import core
from meshsim._src.numpy.creation import _check_arraylike
from meshsim._src.numpy.promotion import promote_dtypes

__all__ = ["isin", "union1d", "intersect1d", "setdiff1d", "setxor1d", "unique_values", "unique_counts",
           "unique_inverse", "unique_all"]


def _arrays(name: str, *args):
    _check_arraylike(name, *args)
    return [core.asarray_value(a) for a in args]


def _concrete(x, fn: str):
    if isinstance(x, core.Tracer):
        raise TypeError(f"{fn}() needs concrete inputs to know its output shape; got {core.typeof(x)}. "
                        "Pass size= (and fill_value=) to use it under jit.")
    return x


def _in1d(ar1, ar2, invert: bool):
    arr1, arr2 = promote_dtypes(ar1, ar2)
    arr1, arr2 = jnp.ravel(arr1), jnp.ravel(arr2)
    if arr1.size == 0 or arr2.size == 0:
        return (jnp.ones if invert else jnp.zeros)(arr1.shape, dtype=bool)
    if invert:
        return jnp.all(arr1[:, None] != arr2[None, :], -1)
    return jnp.any(arr1[:, None] == arr2[None, :], -1)


def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *, method="auto"):
    """Whether each element of `element` occurs in `test_elements` (elementwise comparison)."""
    element, test_elements = _arrays("isin", element, test_elements)
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"method={method!r} is not implemented; options are "
                         "'compare_all', 'binary_search', 'sort', and 'auto'")
    return jnp.reshape(_in1d(element, test_elements, invert), element.shape)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values of both arrays."""
    ar1, ar2 = _arrays("union1d", ar1, ar2)
    if size is None:
        _concrete(ar1, "union1d"), _concrete(ar2, "union1d")
    else:
        size = operator.index(size)
    return jnp.unique(jnp.concatenate((ar1, ar2), axis=None), size=size, fill_value=fill_value)


def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False, *, size=None,
                fill_value=None):
    """The sorted values in both arrays (with their first indices in each, if asked)."""
    from meshsim._src.numpy.sorting import _unique_sized
    ar1, ar2 = _arrays("intersect1d", ar1, ar2)
    arr1, arr2 = promote_dtypes(ar1, ar2)
    arr1, arr2 = jnp.ravel(arr1), jnp.ravel(arr2)
    if size is None:
        _concrete(arr1, "intersect1d"), _concrete(arr2, "intersect1d")
        ind1 = ind2 = jnp.arange(0)
        if not assume_unique:
            arr1, ind1 = jnp.unique(arr1, return_index=True)
            arr2, ind2 = jnp.unique(arr2, return_index=True)
        aux = jnp.concatenate([arr1, arr2])
        order = jnp.argsort(aux, stable=True)
        aux = aux[order]
        mask = np.asarray(aux[1:] == aux[:-1])
        vals = aux[:-1][mask]
        if not return_indices:
            return vals
        idx1 = order[:-1][mask]
        idx2 = order[1:][mask] - arr1.size
        if not assume_unique:
            idx1, idx2 = ind1[idx1], ind2[idx2]
        return vals, idx1, idx2
    size = operator.index(size)
    # JAX's algorithm: both arrays' unique values (padded), sorted together; equal neighbours are common.
    n1, n2 = arr1.size, arr2.size
    if assume_unique:
        ind1, num1 = jnp.arange(n1), n1
        ind2, num2 = jnp.arange(n2), n2
        arr = jnp.concatenate([arr1, arr2])
        order = jnp.argsort(arr, stable=True)
        aux, aux_sort_indices = arr[order], order
        mask = jnp.ones(arr.size, dtype=bool)
    else:
        arr1, ind1, num1 = _unique_sized(arr1, True, False, False, True, n1, 0, return_true_size=True)
        arr2, ind2, num2 = _unique_sized(arr2, True, False, False, True, n2, 0, return_true_size=True)
        # arr2's unique values right after arr1's, the padding after both
        pos = jnp.concatenate([jnp.where(jnp.arange(n1) < num1, jnp.arange(n1), n1 + n2), num1 + jnp.arange(n2)])
        arr = jnp.zeros(n1 + n2, dtype=arr1.dtype).at[pos].set(jnp.concatenate([arr1, arr2]), mode="drop")
        mask = jnp.arange(arr.size) < num1 + num2
        aux_sort_indices = jnp.lexsort((jnp.arange(arr.size), arr, ~mask))
        aux = arr[aux_sort_indices]
        mask = mask[aux_sort_indices]
    aux_mask = (aux[1:] == aux[:-1]) & mask[1:]
    num_results = aux_mask.sum()
    if aux.size:
        val_indices = jnp.nonzero(aux_mask, size=size, fill_value=aux.size)[0]
        vals = aux.at[val_indices].get(mode="fill", fill_value=0)
    else:
        val_indices = jnp.arange(0)
        vals = jnp.zeros(size, aux.dtype)
    valid = jnp.arange(len(vals)) < num_results
    if fill_value is None:
        vals = jnp.where(valid, vals, vals.max())
        vals = jnp.where(valid, vals, vals.min())
    else:
        vals = jnp.where(valid, vals, fill_value)
    if not return_indices:
        return vals
    idx1 = aux_sort_indices.at[val_indices].get(mode="fill", fill_value=n1)
    idx1 = jnp.where(valid, idx1, n1)
    idx2 = aux_sort_indices.at[val_indices + 1].get(mode="fill", fill_value=n2) - num1
    idx2 = jnp.where(valid, idx2, n2)
    if not assume_unique:
        idx1 = ind1.at[idx1].get(mode="fill", fill_value=ind1.size)
        idx2 = ind2.at[idx2].get(mode="fill", fill_value=ind2.size)
    return vals, idx1, idx2


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted unique values of ar1 that are not in ar2."""
    arr1, arr2 = _arrays("setdiff1d", ar1, ar2)
    arr1, arr2 = jnp.ravel(arr1), jnp.ravel(arr2)
    if size is None:
        _concrete(arr1, "setdiff1d")
    else:
        size = operator.index(size)
    fill = jnp.full_like(arr1, 0 if fill_value is None else fill_value, shape=())
    if arr1.size == 0:
        return jnp.full_like(arr1, fill, shape=size or 0)
    if not assume_unique:
        arr1 = jnp.unique(arr1, size=size and arr1.size)
    mask = _in1d(arr1, arr2, invert=True)
    if size is None:
        return arr1[np.asarray(mask)]
    if not assume_unique:
        # unique() pads with its smallest value: drop the padding.
        n_unique = arr1.size + 1 - jnp.sum(arr1 == arr1[0])
        mask = jnp.where(jnp.arange(arr1.size) < n_unique, mask, False)
    return jnp.where(jnp.arange(size) < jnp.sum(mask), arr1[jnp.where(mask, size=size)], fill)


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted values in exactly one of the arrays."""
    ar1, ar2 = _arrays("setxor1d", ar1, ar2)
    arr1, arr2 = promote_dtypes(jnp.ravel(ar1), jnp.ravel(ar2))
    if size is None:
        _concrete(arr1, "setxor1d"), _concrete(arr2, "setxor1d")
        if not assume_unique:
            arr1, arr2 = jnp.unique(arr1), jnp.unique(arr2)
        aux = jnp.concatenate((arr1, arr2))
        if aux.size == 0:
            return aux
        aux = jnp.sort(aux)
        flag = np.concatenate(([True], np.asarray(aux[1:] != aux[:-1]), [True]))
        return aux[flag[1:] & flag[:-1]]
    size = operator.index(size)
    aux = jnp.concatenate((arr1, arr2))
    if aux.size == 0:
        return jnp.full(size, 0 if fill_value is None else fill_value, aux.dtype)
    if assume_unique:
        valid = jnp.ones(aux.size, bool)
    else:  # unique values of each, padding marked invalid
        arr1, k1 = jnp.unique(arr1, return_counts=True, size=arr1.size, fill_value=0) if arr1.size else (arr1, arr1)
        arr2, k2 = jnp.unique(arr2, return_counts=True, size=arr2.size, fill_value=0) if arr2.size else (arr2, arr2)
        aux, valid = jnp.concatenate((arr1, arr2)), jnp.concatenate((k1 > 0, k2 > 0))
    order = jnp.lexsort((aux, ~valid))
    aux, valid = aux[order], valid[order]
    same = (aux[1:] == aux[:-1]) & valid[1:]
    keep = valid & ~jnp.concatenate([jnp.zeros(1, bool), same]) & ~jnp.concatenate([same, jnp.zeros(1, bool)])
    vals = aux[jnp.nonzero(keep, size=size, fill_value=0)[0]]
    fill = vals[0] if fill_value is None else fill_value
    return jnp.where(jnp.arange(size) < keep.sum(), vals, jnp.asarray(fill).astype(vals.dtype))


class _UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class _UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class _UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted unique values of x (NaNs not merged)."""
    (x,) = _arrays("unique_values", x)
    return jnp.unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """(values, counts) of x's unique values."""
    (x,) = _arrays("unique_counts", x)
    values, counts = jnp.unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value)
    return _UniqueCountsResult(values=values, counts=counts)


def unique_inverse(x, /, *, size=None, fill_value=None):
    """(values, inverse_indices): x == values[inverse_indices]."""
    (x,) = _arrays("unique_inverse", x)
    values, inverse = jnp.unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value)
    return _UniqueInverseResult(values=values, inverse_indices=inverse)


def unique_all(x, /, *, size=None, fill_value=None):
    """(values, indices, inverse_indices, counts) of x's unique values."""
    (x,) = _arrays("unique_all", x)
    values, indices, inverse, counts = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                                  equal_nan=False, size=size, fill_value=fill_value)
    return _UniqueAllResult(values=values, indices=indices, inverse_indices=inverse, counts=counts)
