"""meshsim.numpy: reductions, statistics and cumulative operations (as jax.numpy).

The recipes follow jax/_src/numpy/reductions.py: the same dtype rules
(integer sums widen to the default integer, means are inexact), the same
handling of `where`, `initial` and `keepdims`, and the same errors."""
from __future__ import annotations

import builtins
import math
import operator

import ml_dtypes
import numpy as np

from meshsim._src import api
from meshsim._src import core, ref
from meshsim._src.lax import elementwise as lax
from meshsim._src.lax import reduction as lax_reduction
from meshsim._src.lax import structural as lax_structural
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy import sorting, ufuncs
from meshsim._src.numpy.creation import user_dtype
from meshsim._src.numpy.promotion import broadcast_to_shape, promote_args_inexact, promote_dtypes_inexact
from meshsim._src import dtype_kinds

__all__ = [
    "sum", "prod", "max", "min", "amax", "amin", "all", "any", "mean", "average", "var", "std",
    "ptp", "count_nonzero", "median", "argmax", "argmin", "cumsum", "cumprod",
    "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax",
    "nanargmin", "nancumsum", "nancumprod", "diff", "ediff1d", "trapezoid", "cumulative_sum",
    "cumulative_prod", "quantile", "nanquantile", "percentile", "nanpercentile", "nanmedian", "cov", "corrcoef",
]


# --- dtypes, axes, constants ---------------------------------------------------

def _default_int() -> np.dtype:
    return core.canonicalize_dtype(np.int64)


def _default_float() -> np.dtype:
    return core.canonicalize_dtype(np.float64)


def _promote_integer_dtype(dtype: np.dtype) -> np.dtype:
    """Bools and narrow integers widen to the default (unsigned) integer, as JAX's sums do."""
    if dtype == np.bool_:
        return _default_int()
    if dtype.type in dtype_kinds.INT4_TYPES:  # JAX asks NumPy's iinfo, which does not know them
        raise ValueError("Invalid integer data type 'V'.")
    if dtype_kinds.issubdtype(dtype, np.unsignedinteger):
        return builtins.max(dtype, core.canonicalize_dtype(np.uint64), key=lambda d: d.itemsize)
    if dtype_kinds.issubdtype(dtype, np.signedinteger):
        return builtins.max(dtype, _default_int(), key=lambda d: d.itemsize)
    return dtype


def _to_inexact(dtype: np.dtype) -> np.dtype:
    return dtype if dtype_kinds.issubdtype(dtype, np.inexact) else _default_float()


def _asarray(name: str, a):
    if isinstance(a, ref.Ref):
        raise ref.operand_error(name, 0, jitted=True)
    if isinstance(a, (list, tuple)):
        raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at position 0.")
    return core.asarray_value(a)


def _no_out(name: str, out):
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")


def _check_where(name: str, where):
    if where is None:
        return None
    where = core.asarray_value(where)
    if where.dtype != np.bool_:
        raise ValueError(f"jnp.{name}: where must be None or a boolean array; got where.dtype={where.dtype!r}.")
    return where


def _reduction_axes(ndim: int, axis) -> tuple[int, ...]:
    """`axis` (None, an int or a sequence) as distinct non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list, np.ndarray)) else (axis,)
    canonical = tuple(canonicalize_axis(a, ndim) for a in axes)
    if len(set(canonical)) != len(canonical):
        raise ValueError(f"duplicate value in 'axis': {axis}")
    return canonical


def _const(value, dtype):
    """A strongly typed rank-0 constant (lax ops broadcast it)."""
    return core.Array.from_numpy(np.asarray(value, dtype=dtype), weak_type=False)


def _identity(dtype: np.dtype, value) -> np.ndarray:
    """A reduction's identity in `dtype`; infinities clip to an integer type's range."""
    if dtype == np.bool_:
        return np.asarray(value > 0, dtype)
    if dtype_kinds.issubdtype(dtype, np.integer) and np.isinf(value):
        info = np.iinfo(dtype)
        return np.asarray(info.min if value < 0 else info.max, dtype)
    return np.asarray(value, dtype)


def _isnan(x):
    return lax.ne(x, x)


def _ravel(x):
    return lax_structural.reshape(x, (x.size,))


# --- reductions with an identity (or an `initial`) --------------------------------

# The lax op that folds `initial` into a result, per primitive.
_COMBINE = {"reduce_sum": lax.add, "reduce_prod": lax.mul, "reduce_max": lax.max,
            "reduce_min": lax.min, "reduce_and": lax.bitwise_and, "reduce_or": lax.bitwise_or}
# Sums and products of bools are or/and (the numeric primitives take no bools).
_BOOL_PRIM = {"reduce_sum": "reduce_or", "reduce_prod": "reduce_and"}


def _reduction(a, name: str, prim: str, identity, *, has_identity: bool = True, preproc=None,
               axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None,
               promote_integers: bool = False, upcast_f16_for_computation: bool = False):
    _no_out(name, out)
    a = _asarray(name, a)
    where = _check_where(name, where)
    if initial is None and not has_identity and where is not None:
        raise ValueError(f"reduction operation {name} does not have an identity, so to use a where "
                         "mask one has to specify 'initial'")
    if preproc is not None:
        a = preproc(a)
    axes = _reduction_axes(a.ndim, axis)
    if initial is None and not has_identity and builtins.any(a.shape[d] == 0 for d in axes):
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    if dtype is None:
        result_dtype = _promote_integer_dtype(a.dtype) if promote_integers else a.dtype
    else:
        result_dtype = user_dtype(dtype)
    # float16 and bfloat16 sums and products run in float32 and round once, as
    # JAX's do (lax's own narrow reductions round at every step).
    computation_dtype = result_dtype
    if upcast_f16_for_computation and dtype_kinds.issubdtype(result_dtype, np.inexact):
        computation_dtype = _upcast_f16(result_dtype)
    a = core.convert_element_type(a, computation_dtype)
    if computation_dtype == np.bool_:
        prim = _BOOL_PRIM.get(prim, prim)
    if where is not None:
        a = ufuncs.where(where, a, _const(_identity(computation_dtype, identity), computation_dtype))
    result = core.bind1(prim, a, axes=axes)
    if initial is not None:
        initial = core.convert_element_type(initial, computation_dtype)
        if initial.shape != ():
            raise ValueError(f"initial value must be a scalar. Got array of shape {initial.shape}")
        result = _COMBINE[prim](initial, result)
    if keepdims:
        result = lax_structural.expand_dims(result, axes)
    return core.convert_element_type(result, result_dtype)


def _numeric(a):
    """Bools count as the default integer (jnp.sum of bools counts them)."""
    return core.convert_element_type(a, _default_int()) if a.dtype == np.bool_ else a


def _boolean(a):
    return core.convert_element_type(a, np.bool_)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,  # noqa: A001
        promote_integers=True):
    return _reduction(a, "sum", "reduce_sum", 0, preproc=_numeric, axis=axis, dtype=dtype, out=out,
                      keepdims=keepdims, initial=initial, where=where, promote_integers=promote_integers,
                      upcast_f16_for_computation=dtype is None)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    return _reduction(a, "prod", "reduce_prod", 1, preproc=_numeric, axis=axis, dtype=dtype, out=out,
                      keepdims=keepdims, initial=initial, where=where, promote_integers=promote_integers,
                      upcast_f16_for_computation=dtype is None)


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
    return _reduction(a, "max", "reduce_max", -np.inf, has_identity=False, axis=axis, out=out,
                      keepdims=keepdims, initial=initial, where=where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
    return _reduction(a, "min", "reduce_min", np.inf, has_identity=False, axis=axis, out=out,
                      keepdims=keepdims, initial=initial, where=where)


amax = max
amin = min


def all(a, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
    return _reduction(a, "all", "reduce_and", True, preproc=_boolean, axis=axis, out=out,
                      keepdims=keepdims, where=where)


def any(a, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
    return _reduction(a, "any", "reduce_or", False, preproc=_boolean, axis=axis, out=out,
                      keepdims=keepdims, where=where)


# --- statistics -------------------------------------------------------------------

def _size(a, axis) -> int:
    """How many elements each output of a reduction over `axis` reduces."""
    return math.prod(a.shape[d] for d in _reduction_axes(a.ndim, axis))


def _count(a, axis, keepdims: bool, where, dtype):
    """How many elements each output reduces (those `where` selects, if given)."""
    if where is None:
        return _const(_size(a, axis), dtype)
    return sum(broadcast_to_shape(where, a.shape), axis, dtype=dtype, keepdims=keepdims)


_DIVIDES_BY_BROADCAST_RECIPROCAL = tuple(np.dtype(d) for d in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16))


def _divide_by_count(total, count: int, dtype, where):
    """total / count as XLA compiles JAX's mean and var: a count known from the
    shape is a constant, and XLA multiplies by its reciprocal, rounded to the
    dtype. The div kernel does so for a scalar divisor beside a larger quotient
    in the real dtypes; a scalar total, complex and float8 totals take the
    reciprocal here. A count computed from `where` divides."""
    if where is None and (total.ndim == 0 or np.dtype(dtype) not in _DIVIDES_BY_BROADCAST_RECIPROCAL):
        with np.errstate(divide="ignore"):  # an empty mean: 0 * inf is NaN, as in JAX
            reciprocal = np.asarray(1, dtype) / np.asarray(count, dtype)
        return lax.mul(total, _const(reciprocal, dtype))
    return lax.div(total, count if where is not None else _const(count, dtype))


def _upcast_f16(dtype) -> np.dtype:
    """float32 for float16 and bfloat16, which mean and var compute in (as JAX)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)) else dtype


def _mean(a, axis=None, dtype=None, keepdims=False, where=None):
    result_dtype = _to_inexact(a.dtype) if dtype is None else user_dtype(dtype)
    computation_dtype = _upcast_f16(result_dtype) if dtype_kinds.issubdtype(result_dtype, np.inexact) else result_dtype
    total = sum(a, axis, dtype=computation_dtype, keepdims=keepdims, where=where)
    count = _count(a, axis, keepdims, where, computation_dtype) if where is not None else _size(a, axis)
    return core.convert_element_type(_divide_by_count(total, count, computation_dtype, where), result_dtype)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    _no_out("mean", out)
    return _mean(_asarray("mean", a), axis, dtype, keepdims, _check_where("mean", where))


def _var_dtypes(a_dtype: np.dtype, dtype) -> tuple[np.dtype, np.dtype]:
    """(computation dtype, result dtype) of var/std."""
    if dtype is not None:
        dtype = user_dtype(dtype)
        return _upcast_f16(dtype), dtype
    computation = _to_inexact(a_dtype)
    # the variance of complex values is real: the mean of |x - mean|^2
    return _upcast_f16(computation), np.dtype(computation.type(0).real.dtype)


def _correction(ddof, correction):
    if correction is None:
        return ddof
    if not isinstance(ddof, int) or ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def _var_operands(name, a, axis, dtype, out, where, a_mean, mean_fn):
    """What var and nanvar start from: the operand in the computation dtype,
    `where`, the computation and result dtypes, and the mean (`mean_fn`'s
    unless given)."""
    _no_out(name, out)
    a = _asarray(name, a)
    where = _check_where(name, where)
    computation_dtype, dtype = _var_dtypes(a.dtype, dtype)
    a = core.convert_element_type(a, computation_dtype)
    if a_mean is None:
        a_mean = mean_fn(a, axis, dtype=computation_dtype, keepdims=True, where=where)
    else:
        a_mean = core.convert_element_type(core.asarray_value(a_mean), computation_dtype)
    return a, where, computation_dtype, dtype, a_mean


def _variance(name, a, axis, dtype, out, correction, keepdims, where, a_mean):
    a, where, computation_dtype, dtype, a_mean = _var_operands(name, a, axis, dtype, out, where,
                                                               a_mean, _mean)
    centered = ufuncs.subtract(a, a_mean)
    if dtype_kinds.issubdtype(computation_dtype, np.complexfloating):
        centered = lax.real(lax.mul(centered, lax.conj(centered)))
        computation_dtype = centered.dtype
    else:
        centered = lax.square(centered)
    normalizer = lax.sub(_count(a, axis, keepdims, where, computation_dtype),
                         core.convert_element_type(correction, computation_dtype, False))
    result = sum(centered, axis, dtype=computation_dtype, keepdims=keepdims, where=where)
    result = core.convert_element_type(lax.div(result, normalizer), dtype)
    return ufuncs.where(lax.gt(normalizer, _const(0, computation_dtype)), result, np.nan)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    correction = _correction(ddof, correction)
    return _var(_asarray("var", a), axis=_static_axes(axis), dtype=dtype, out=out, correction=correction,
                keepdims=keepdims, where=where, a_mean=mean)


@api.jitted_when_traced(static_argnames=('axis', 'dtype', 'keepdims'))
def _var(a, *, axis=None, dtype=None, out=None, correction=0, keepdims=False, where=None, a_mean=None):
    return _variance("var", a, axis, dtype, out, correction, keepdims, where, a_mean)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    correction = _correction(ddof, correction)
    return _std(_asarray("std", a), axis=_static_axes(axis), dtype=dtype, out=out, correction=correction,
                keepdims=keepdims, where=where, mean=mean)


@api.jitted_when_traced(static_argnames=('axis', 'dtype', 'keepdims'))
def _std(a, *, axis=None, dtype=None, out=None, correction=0, keepdims=False, where=None, mean=None):
    _no_out("std", out)
    _check_where("std", where)
    return lax.sqrt(var(a, axis=axis, dtype=dtype, correction=correction, keepdims=keepdims,
                        where=where, mean=mean))


def _static_axes(axis):
    """`axis` as a static argument of a jitted function: a list becomes a tuple, as JAX's
    _ensure_optional_axes makes it."""
    return tuple(axis) if isinstance(axis, list) else axis


def ptp(a, axis=None, out=None, keepdims=False):
    return _ptp(_asarray("ptp", a), _static_axes(axis), out, keepdims)


@api.jitted_when_traced(static_argnames=('axis', 'keepdims'))
def _ptp(a, axis=None, out=None, keepdims=False):
    _no_out("ptp", out)
    return lax.sub(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


@api.jitted_when_traced(static_argnames=('axis', 'keepdims'))
def count_nonzero(a, axis=None, keepdims=False):
    a = _asarray("count_nonzero", a)
    return sum(lax.ne(a, _const(0, a.dtype)), axis=axis, dtype=_default_int(), keepdims=keepdims)


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    a = _asarray("average", a)
    axes = _reduction_axes(a.ndim, axis)
    if weights is None:
        a, = promote_args_inexact(a)
        avg = mean(a, axis=axis, keepdims=keepdims)
        weights_sum = _const(math.prod(a.shape[d] for d in axes), avg.dtype)
    else:
        weights = core.asarray_value(weights)
        if weights.shape != a.shape:
            weights = _weights_along(a, weights, axis, axes)
        a, weights = promote_args_inexact(a, weights)
        weights_sum = sum(weights, axis=axis, keepdims=keepdims)
        avg = ufuncs.true_divide(sum(ufuncs.multiply(a, weights), axis=axis, keepdims=keepdims),
                                 weights_sum)
    if returned:
        return avg, broadcast_to_shape(weights_sum, avg.shape)
    return avg


def _weights_along(a, weights, axis, axes):
    """Weights given per reduced axis, reshaped to broadcast against `a` (as JAX accepts them)."""
    if axis is None:
        raise ValueError("Axis must be specified when shapes of a and weights differ.")
    if weights.shape != tuple(a.shape[d] for d in axes):
        raise ValueError("Shape of weights must be consistent with shape of a along specified axis.")
    weights = lax_structural.transpose(weights, tuple(int(i) for i in np.argsort(axes)))
    return lax_structural.reshape(weights, tuple(n if d in axes else 1 for d, n in enumerate(a.shape)))


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The midpoint of the two middle values of each sorted slice; NaN if the slice has one."""
    _no_out("median", out)
    a, = promote_args_inexact(_asarray("median", a))
    a = core.convert_element_type(a, a.dtype)  # a weakly typed scalar gives a strong result
    axes = _reduction_axes(a.ndim, axis)
    kept = [d for d in range(a.ndim) if d not in axes]
    n = math.prod(a.shape[d] for d in axes)
    rows = lax_structural.reshape(lax_structural.transpose(a, tuple(kept + list(axes))),
                                  tuple(a.shape[d] for d in kept) + (n,))
    if n == 0:
        result = lax_structural.full(rows.shape[:-1], np.nan, a.dtype)
    else:
        s = sorting.sort(rows, axis=-1)
        last = s.ndim - 1
        low = lax_structural.index_in_dim(s, (n - 1) // 2, axis=last, keepdims=False)
        high = lax_structural.index_in_dim(s, n // 2, axis=last, keepdims=False)
        result = lax.mul(lax.add(low, high), _const(0.5, a.dtype))
        result = ufuncs.where(any(_isnan(rows), axis=-1), np.nan, result)
    if keepdims:
        result = lax_structural.expand_dims(result, axes)
    return result


# --- argmax / argmin ------------------------------------------------------------

def _arg_reduction(name: str, lax_fn):
    def arg_reduction(a, axis=None, out=None, keepdims=None):
        _no_out(name, out)
        a = _asarray(name, a)
        if axis is None:
            dims, a, axis = tuple(range(a.ndim)), _ravel(a), 0
        else:
            axis = canonicalize_axis(axis, a.ndim)
            dims = (axis,)
        if a.shape[axis] == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        result = lax_fn(a, axis, _default_int())
        return lax_structural.expand_dims(result, dims) if keepdims else result
    arg_reduction.__name__ = arg_reduction.__qualname__ = name
    return arg_reduction


argmax = _arg_reduction("argmax", lax_reduction.argmax)
argmin = _arg_reduction("argmin", lax_reduction.argmin)


# --- cumulative -----------------------------------------------------------------

def _cumulative(name: str, a, axis, dtype, out, lax_fn, nan_fill=None):
    _no_out(name, out)
    a = _asarray(name, a)
    if axis is None or a.ndim == 0:
        a = _ravel(a)
    axis = canonicalize_axis(0 if axis is None else axis, a.ndim)
    if nan_fill is not None and dtype_kinds.issubdtype(a.dtype, np.floating):
        a = ufuncs.where(_isnan(a), _const(nan_fill, a.dtype), a)
    if dtype is None:
        result_dtype = _promote_integer_dtype(a.dtype) if a.dtype == np.bool_ else a.dtype
        computation_dtype = result_dtype
    elif user_dtype(dtype) == np.bool_:
        # Scanning in bool means "any so far": count the nonzeros, then test.
        result_dtype = np.dtype(np.bool_)
        if a.dtype != np.bool_:
            a = lax.ne(a, _const(0, a.dtype))
        computation_dtype = _promote_integer_dtype(result_dtype)
    else:
        result_dtype = computation_dtype = user_dtype(dtype)
    result = lax_fn(core.convert_element_type(a, computation_dtype), axis)
    return core.convert_element_type(result, result_dtype)


@api.jitted_when_traced(static_argnames=('axis', 'dtype'))
def cumsum(a, axis=None, dtype=None, out=None):
    return _cumulative("cumsum", a, axis, dtype, out, lax_reduction.cumsum)


@api.jitted_when_traced(static_argnames=('axis', 'dtype'))
def cumprod(a, axis=None, dtype=None, out=None):
    return _cumulative("cumprod", a, axis, dtype, out, lax_reduction.cumprod)


@api.jitted_when_traced(static_argnames=('axis', 'dtype'))
def nancumsum(a, axis=None, dtype=None, out=None):
    return _cumulative("nancumsum", a, axis, dtype, out, lax_reduction.cumsum, nan_fill=0)


@api.jitted_when_traced(static_argnames=('axis', 'dtype'))
def nancumprod(a, axis=None, dtype=None, out=None):
    return _cumulative("nancumprod", a, axis, dtype, out, lax_reduction.cumprod, nan_fill=1)


# --- NaN-ignoring variants ---------------------------------------------------------

def _nan_reduction(a, name: str, reduction, identity, nan_if_all_nan: bool, axis=None,
                   keepdims=False, where=None, **kwargs):
    """`reduction` with NaNs replaced by its identity; all-NaN slices give NaN if asked."""
    a = _asarray(name, a)
    where = _check_where(name, where)
    if not dtype_kinds.issubdtype(a.dtype, np.inexact):
        return reduction(a, axis=axis, keepdims=keepdims, where=where, **kwargs)
    nan = _isnan(a)
    out = reduction(ufuncs.where(nan, _const(identity, a.dtype), a), axis=axis, keepdims=keepdims,
                    where=where, **kwargs)
    if nan_if_all_nan:
        # NaNs found again, as JAX's program does
        return ufuncs.where(all(_isnan(a), axis=axis, keepdims=keepdims), _const(np.nan, a.dtype), out)
    return out


@api.jitted_when_traced(static_argnames=('axis', 'dtype', 'keepdims'))
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nansum", out)
    return _nan_reduction(a, "nansum", sum, 0, False, axis, keepdims, where, dtype=dtype, initial=initial)


@api.jitted_when_traced(static_argnames=('axis', 'dtype', 'keepdims'))
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nanprod", out)
    return _nan_reduction(a, "nanprod", prod, 1, False, axis, keepdims, where, dtype=dtype, initial=initial)


@api.jitted_when_traced(static_argnames=('axis', 'keepdims'))
def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nanmax", out)
    return _nan_reduction(a, "nanmax", max, -np.inf, initial is None, axis, keepdims, where, initial=initial)


@api.jitted_when_traced(static_argnames=('axis', 'keepdims'))
def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nanmin", out)
    return _nan_reduction(a, "nanmin", min, np.inf, initial is None, axis, keepdims, where, initial=initial)


@api.jitted_when_traced(static_argnames=('axis', 'dtype', 'keepdims'))
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    _no_out("nanmean", out)
    a = _asarray("nanmean", a)
    where = _check_where("nanmean", where)
    if not dtype_kinds.issubdtype(a.dtype, np.floating):
        return _mean(a, axis, dtype, keepdims, where)
    dtype = a.dtype if dtype is None else user_dtype(dtype)
    count = sum(lax.bitwise_not(_isnan(a)), axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    return lax.div(nansum(a, axis, dtype=dtype, keepdims=keepdims, where=where), count)


def _nanvar(name, a, axis, dtype, out, ddof, keepdims, where, a_mean):
    a, where, computation_dtype, dtype, a_mean = _var_operands(name, a, axis, dtype, out, where,
                                                               a_mean, nanmean)
    nan = _isnan(a)
    centered = lax.square(ufuncs.where(nan, _const(0, computation_dtype), ufuncs.subtract(a, a_mean)))
    # ddof is an operand of nanvar's jit: subtracted as jnp's `-` promotes it
    count = ufuncs.subtract(sum(lax.bitwise_not(nan), axis=axis, keepdims=keepdims, where=where), ddof)
    empty = lax.le(count, _const(0, count.dtype))
    result = ufuncs.where(empty, np.nan, sum(centered, axis, keepdims=keepdims, where=where))
    divisor = core.convert_element_type(ufuncs.where(empty, 1, count), result.dtype)
    return core.convert_element_type(lax.div(result, divisor), dtype)


@api.jitted_when_traced(static_argnames=('axis', 'dtype', 'keepdims'))
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    return _nanvar("nanvar", a, axis, dtype, out, ddof, keepdims, where, mean)


@api.jitted_when_traced(static_argnames=('axis', 'dtype', 'keepdims'))
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    _no_out("nanstd", out)
    return lax.sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where, mean=mean))


def _nan_arg_reduction(name: str, arg_reduction, fill):
    def nan_arg_reduction(a, axis=None, out=None, keepdims=None):
        _no_out(name, out)
        a = _asarray(name, a)
        if not dtype_kinds.issubdtype(a.dtype, np.floating):
            return arg_reduction(a, axis=axis, keepdims=keepdims)
        nan = _isnan(a)
        result = arg_reduction(ufuncs.where(nan, _const(fill, a.dtype), a), axis=axis, keepdims=keepdims)
        return ufuncs.where(all(nan, axis=axis, keepdims=keepdims), _const(-1, result.dtype), result)
    nan_arg_reduction.__name__ = nan_arg_reduction.__qualname__ = name
    return nan_arg_reduction


nanargmax = _nan_arg_reduction("nanargmax", argmax, -np.inf)
nanargmin = _nan_arg_reduction("nanargmin", argmin, np.inf)


# --- differences, integrals, cumulative sums (array API) --------------------------------

@api.jitted_when_traced(static_argnames=('n', 'axis'))
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference along axis (not_equal for booleans)."""
    from meshsim._src.numpy import namespace as jnp
    arr = _asarray("diff", a)
    n, axis = operator.index(n), operator.index(axis)
    if n == 0:
        return arr
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if arr.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
    axis = canonicalize_axis(axis, arr.ndim)
    combined = []
    for i, extra in enumerate((prepend, None, append)):
        if i == 1:
            combined.append(arr)
        elif extra is not None:
            extra = _asarray("diff", extra)
            if not extra.ndim:
                shape = list(arr.shape)
                shape[axis] = 1
                extra = jnp.broadcast_to(extra, tuple(shape))
            combined.append(extra)
    if len(combined) > 1:
        arr = jnp.concatenate(combined, axis)
    later = tuple(slice(1, None) if d == axis else slice(None) for d in range(arr.ndim))
    earlier = tuple(slice(None, -1) if d == axis else slice(None) for d in range(arr.ndim))
    op = ufuncs.not_equal if arr.dtype == np.bool_ else ufuncs.subtract
    for _ in range(n):
        arr = op(arr[later], arr[earlier])
    return arr


@api.jitted_when_traced
def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of consecutive elements of the flattened array, with optional ends."""
    from meshsim._src.numpy import namespace as jnp
    arr = _ravel(_asarray("ediff1d", ary))
    result = lax.sub(arr[1:], arr[:-1])
    if to_begin is not None:
        result = jnp.concatenate((_ravel(_asarray("ediff1d", to_begin).astype(arr.dtype)), result))
    if to_end is not None:
        result = jnp.concatenate((result, _ravel(_asarray("ediff1d", to_end).astype(arr.dtype))))
    return result


@api.jitted_when_traced(static_argnames=('axis',))
def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of y along axis by the trapezoidal rule (sample points x, or spacing dx)."""
    from meshsim._src.numpy import namespace as jnp
    if x is None:
        (y,) = promote_args_inexact(_asarray("trapezoid", y))
        dx = jnp.asarray(dx)
        if dx.ndim > 0:
            dx = jnp.moveaxis(lax_structural.expand_dims(dx, tuple(range(y.ndim - dx.ndim))), axis, -1)
    else:
        y, x = promote_dtypes_inexact(_asarray("trapezoid", y), _asarray("trapezoid", x))
        dx = diff(x) if x.ndim == 1 else jnp.moveaxis(diff(x, axis=axis), axis, -1)
    y = jnp.moveaxis(y, axis, -1)
    if dx.ndim == 0 or dx.shape[-1] == 1:  # constant spacing
        dx = dx if dx.ndim == 0 else dx[..., 0]
        return dx * (sum(y, -1) - 0.5 * (y[..., 0] + y[..., -1]))
    return 0.5 * sum(dx * (y[..., 1:] + y[..., :-1]), -1)


def _cumulative_with_initial(name: str, what: str, x, axis, dtype, include_initial, fn, initial):
    from meshsim._src.numpy import namespace as jnp
    x = _asarray(name, x)
    if x.ndim == 0:
        raise ValueError(f"The input must be non-scalar to take a cumulative {what}, however a "
                         "scalar value or scalar array was given.")
    if axis is None:
        axis = 0
        if x.ndim > 1:
            raise ValueError(f"The input array has rank {x.ndim}, however axis was not set to an explicit value. "
                             "The axis argument is only optional for one-dimensional arrays.")
    axis = canonicalize_axis(axis, x.ndim)
    out = fn(x, axis=axis, dtype=dtype)
    if include_initial:
        shape = list(x.shape)
        shape[axis] = 1
        out = jnp.concatenate([jnp.full(shape, initial, dtype=out.dtype), out], axis=axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial: bool = False):
    """cumsum along axis (required unless x is 1-D), optionally starting with 0."""
    return _cumulative_with_initial("cumulative_sum", "sum", x, axis, dtype, include_initial, cumsum, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial: bool = False):
    """cumprod along axis (required unless x is 1-D), optionally starting with 1."""
    return _cumulative_with_initial("cumulative_prod", "product", x, axis, dtype, include_initial, cumprod, 1)


# --- quantiles ---------------------------------------------------------------------------

_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _quantile(name: str, a, q, axis, method, keepdims, squash_nans, weights, out, overwrite_input):
    """JAX's quantile: sort each slice, take the elements at floor and ceil of q * (count - 1),
    and combine them as `method` says. NaNs poison a slice, or are skipped with squash_nans."""
    from meshsim._src.numpy import namespace as jnp
    a, q = _asarray(name, a), _asarray(name, q)
    if overwrite_input or out is not None:
        raise ValueError(f"jax.numpy.{name} does not support overwrite_input=True or out != None")
    if method not in _QUANTILE_METHODS:
        raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', 'nearest' or 'inverted_cdf'")
    if weights is not None or method == "inverted_cdf":
        raise NotImplementedError("quantile weights and method='inverted_cdf' are not implemented")
    (a,) = promote_args_inexact(a)
    if q.ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {q.shape}")
    axes = _reduction_axes(a.ndim, axis)
    kept = [d for d in range(a.ndim) if d not in axes]
    # slices as rows: [kept dims..., n]
    rows = lax_structural.reshape(lax_structural.transpose(a, tuple(kept + list(axes))),
                                  tuple(a.shape[d] for d in kept) + (math.prod(a.shape[d] for d in axes),))
    isnan = _isnan(rows)
    if squash_nans:
        counts = sum(lax_structural.full_like(isnan, True) & ~isnan, axis=-1, dtype=q.dtype)
    else:
        counts = lax_structural.full(rows.shape[:-1], rows.shape[-1], q.dtype)
    rows = sorting.sort(rows, axis=-1)  # NaNs sort last
    qb = jnp.reshape(q, q.shape + (1,) * counts.ndim)
    limit = counts - _const(1, q.dtype)
    pos = qb * limit
    low, high = jnp.floor(pos), jnp.ceil(pos)
    high_weight = pos - low
    low_weight = 1 - high_weight
    low = jnp.clip(low, 0, limit).astype(np.int32)
    high = jnp.clip(high, 0, limit).astype(np.int32)
    rows_b = jnp.broadcast_to(rows, low.shape + rows.shape[-1:])
    low_value = jnp.take_along_axis(rows_b, low[..., None], axis=-1)[..., 0]
    high_value = jnp.take_along_axis(rows_b, high[..., None], axis=-1)[..., 0]
    if method == "linear":
        result = low_value.astype(q.dtype) * low_weight + high_value.astype(q.dtype) * high_weight
    elif method == "lower":
        result = low_value
    elif method == "higher":
        result = high_value
    elif method == "nearest":
        result = jnp.where(high_weight <= 0.5, low_value, high_value)
    else:
        result = (low_value + high_value) * _const(0.5, low_value.dtype)
    if not squash_nans:
        result = jnp.where(any(isnan, axis=-1), np.nan, result)
    if keepdims:
        result = lax_structural.expand_dims(result, tuple(q.ndim + d for d in axes))
    return lax.convert_element_type(result, a.dtype)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             weights=None):
    """The q-th quantiles (q in [0, 1]) along axis; q's dims come first in the result."""
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights, out, overwrite_input)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                weights=None):
    """quantile ignoring NaNs."""
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights, out, overwrite_input)


def _percent(name: str, q):
    (q,) = promote_args_inexact(_asarray(name, q))
    return q / 100


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               weights=None):
    """The q-th percentiles (q in [0, 100]) along axis."""
    return quantile(a, _percent("percentile", q), axis, out, overwrite_input, method, keepdims, weights=weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                  weights=None):
    """percentile ignoring NaNs."""
    return nanquantile(a, _percent("nanpercentile", q), axis, out, overwrite_input, method, keepdims,
                       weights=weights)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """median ignoring NaNs."""
    return nanquantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input, keepdims=keepdims,
                       method="midpoint")


# --- covariance ------------------------------------------------------------------------------

def _cov_weights(name: str, w, n: int):
    w = _asarray("cov", w)
    if w.ndim > 1:
        raise RuntimeError(f"cannot handle multidimensional {name}")
    if w.shape[0] != n:
        raise RuntimeError(f"incompatible numbers of samples and {name}")
    return w


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, dtype=None):
    """The covariance matrix of the variables in m's rows (columns if not rowvar), and y's."""
    from meshsim._src.numpy import namespace as jnp
    if y is not None:
        m, y = promote_dtypes_inexact(_asarray("cov", m), _asarray("cov", y))
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    else:
        (m,) = promote_args_inexact(_asarray("cov", m))
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    if dtype is not None and not dtype_kinds.issubdtype(np.dtype(dtype), np.inexact):
        raise ValueError(f"cov: dtype must be a subclass of float or complex; got dtype={dtype}")
    X = jnp.atleast_2d(m)
    if not rowvar and m.ndim != 1:
        X = X.T
    if X.shape[0] == 0:
        return jnp.reshape(jnp.array([]), (0, 0))
    if y is not None:
        y = jnp.atleast_2d(y)
        if not rowvar and y.shape[0] != 1:
            y = y.T
        X = jnp.concatenate((X, y), axis=0)
    if X.shape[1] == 0:
        return jnp.full(() if X.shape[0] == 1 else (X.shape[0], X.shape[0]), np.nan, dtype=X.dtype)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    w = None
    if fweights is not None:
        fweights = _cov_weights("fweights", fweights, X.shape[1])
        if not dtype_kinds.issubdtype(fweights.dtype, np.integer):
            raise TypeError("fweights must be integer.")
        w = jnp.abs(fweights)
    if aweights is not None:
        aweights = _cov_weights("aweights", aweights, X.shape[1])
        aweights = jnp.abs(aweights)
        w = aweights if w is None else w * aweights
    if dtype is not None:
        X = X.astype(dtype)
        w = None if w is None else w.astype(dtype)
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        f = X.shape[1] - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = w_sum - ddof
    else:
        f = w_sum - ddof * sum(w * aweights) / w_sum
    X = X - avg[:, None]
    X_T = X.T if w is None else (X * w[None, :]).T
    return jnp.squeeze(ufuncs.true_divide(jnp.dot(X, X_T), f))


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """Pearson correlation coefficients: cov normalised by the standard deviations, clipped to [-1, 1]."""
    from meshsim._src.numpy import namespace as jnp
    _asarray("corrcoef", x)
    if dtype is not None and not dtype_kinds.issubdtype(np.dtype(dtype), np.inexact):
        raise ValueError(f"corrcoef: dtype must be a subclass of float or complex; got dtype={dtype}")
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return ufuncs.divide(c, c)
    stddev = jnp.sqrt(jnp.diag(c)).astype(c.dtype)
    c = c / stddev[:, None] / stddev[None, :]
    return jnp.clip(c, -1, 1)
