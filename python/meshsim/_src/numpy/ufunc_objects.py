"""`jnp.ufunc` and `jnp.frompyfunc`: a scalar function lifted to arrays, with NumPy's
ufunc methods (`reduce`, `accumulate`, `at`, `outer`, `reduceat`), and the binary
arithmetic, bitwise and logical functions of jax.numpy as instances of it.

A method without a dedicated implementation runs the function in a loop, one element
(or slice) at a time, in NumPy's order: a left fold for `reduce`, a running fold for
`accumulate`, one update per index for `at`. The ufuncs of jax.numpy hand their
methods to the array reductions (`add.reduce` is `sum`, ...), as JAX's do."""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np

from meshsim._src import abstract, api
from meshsim._src.lax import control_flow
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy import reductions, ufuncs
from meshsim._src.numpy.ufuncs import _check_arraylike
from meshsim._src.vmap import vmap

__all__ = ["ufunc", "frompyfunc", "add", "bitwise_and", "bitwise_or", "bitwise_xor", "logaddexp",
           "logaddexp2", "logical_and", "logical_or", "logical_xor", "maximum", "minimum",
           "multiply", "negative", "subtract"]

_AT_INPLACE_ERROR = """\
Because JAX arrays are immutable, jnp.ufunc.at() cannot operate inplace like
np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.
>>> arr = jnp.add.at(arr, ind, val, inplace=False)
"""


def _jnp():
    from meshsim._src.numpy import namespace
    return namespace


class ufunc:
    """A function of `nin` scalars returning `nout` values, applied elementwise over
    broadcast arrays, with NumPy's ufunc methods. `call`, `reduce`, `accumulate`, `at`
    and `reduceat` may supply faster implementations of the corresponding methods."""

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity: Any = None, call: Callable[..., Any] | None = None,
                 reduce: Callable[..., Any] | None = None, accumulate: Callable[..., Any] | None = None,
                 at: Callable[..., Any] | None = None, reduceat: Callable[..., Any] | None = None):
        self.__doc__ = func.__doc__
        self.__name__ = name or func.__name__
        # Read-only: a ufunc passed as a static argument of jit must not change its hash.
        self.__props = {"func": func, "nin": operator.index(nin), "nout": operator.index(nout),
                        "nargs": operator.index(nargs or nin), "identity": identity, "call": call,
                        "reduce": reduce, "accumulate": accumulate, "at": at, "reduceat": reduceat}

    _func = property(lambda self: self.__props["func"])
    nin = property(lambda self: self.__props["nin"])
    nout = property(lambda self: self.__props["nout"])
    nargs = property(lambda self: self.__props["nargs"])
    identity = property(lambda self: self.__props["identity"])

    def _key(self):
        return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ufunc) and self._key() == other._key()

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args, out: None = None, where: None = None):
        _check_arraylike(self.__name__, *args)
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        call = self.__props["call"] or self._call_vectorized
        return call(*args)

    @api.jit(static_argnums=0)
    def _call_vectorized(self, *args):
        return _jnp().vectorize(self._func)(*args)

    def _require_binary(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def _result_dtype(self, *args):
        """The dtype the function gives for scalars of the arguments' dtypes."""
        jnp = _jnp()
        ones = [jnp.ones((), jnp.asarray(a).dtype) for a in args]
        return abstract.eval_shape(self._func, *ones).dtype

    def reduce(self, a, axis: int | None = 0, dtype=None, out: None = None, keepdims: bool = False,
               initial=None, where=None):
        """Folds `a` along `axis` (all axes for None) with the binary function."""
        _check_arraylike(f"{self.__name__}.reduce", a)
        self._require_binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if initial is not None:
            _check_arraylike(f"{self.__name__}.reduce", initial)
        if where is not None:
            _check_arraylike(f"{self.__name__}.reduce", where)
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an identity, "
                                 "so to use a where mask one has to specify 'initial'.")
            if _jnp().asarray(where).dtype != bool:
                raise ValueError(f"where argument must have dtype=bool; got dtype={_jnp().asarray(where).dtype}")
        reduce = self.__props["reduce"] or self._fold
        return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    def _fold(self, a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        jnp = _jnp()
        a = jnp.asarray(a)
        initial = self.identity if initial is None else initial
        dtype = self._result_dtype(a, a) if dtype is None else dtype
        if where is not None:
            where = jnp.broadcast_to(where, a.shape)
        if isinstance(axis, tuple):
            raise NotImplementedError("tuple of axes")
        if axis is None:
            kept_shape = (1,) * a.ndim
            a = a.ravel()
            where = None if where is None else where.ravel()
            axis = 0
        else:
            axis = canonicalize_axis(axis, a.ndim)
            kept_shape = a.shape[:axis] + (1,) + a.shape[axis + 1:]
        a = jnp.moveaxis(a, axis, 0)
        where = None if where is None else jnp.moveaxis(where, axis, 0)
        out_shape = kept_shape if keepdims else a.shape[1:]
        if a.shape[0] == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} which has no identity")
            return jnp.full(out_shape, initial, dtype)

        def step(i, acc):
            folded = self(acc, a[i].astype(dtype))
            return folded if where is None else jnp.where(where[i], folded, acc)

        first = 1 if initial is None else 0
        start = jnp.broadcast_to(jnp.asarray(a[0] if initial is None else initial).astype(dtype), a.shape[1:])
        return control_flow.fori_loop(first, a.shape[0], step, start).reshape(out_shape)

    def accumulate(self, a, axis: int = 0, dtype=None, out: None = None):
        """The running fold of `a` along `axis`: element i folds elements 0..i."""
        self._require_binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        accumulate = self.__props["accumulate"] or self._running_fold
        return accumulate(a, axis=axis, dtype=dtype)

    def _running_fold(self, a, axis=0, dtype=None):
        jnp = _jnp()
        _check_arraylike(f"{self.__name__}.accumulate", a)
        a = jnp.asarray(a)
        dtype = self._result_dtype(a, a) if dtype is None else dtype
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        axis = canonicalize_axis(axis, a.ndim)
        if a.size == 0:
            return jnp.zeros(a.shape, dtype)
        rows = jnp.moveaxis(a, axis, 0).astype(dtype)

        def step(acc, row):
            acc = self(acc, row).astype(dtype)
            return acc, acc

        _, rest = control_flow.scan(step, rows[0], rows[1:])
        return jnp.moveaxis(jnp.concatenate([rows[:1], rest]), 0, axis)

    def at(self, a, indices, b=None, /, *, inplace: bool = True):
        """`a` with the function applied at `indices` (with `b` as second operand), each
        repeated index applied again: an updated copy, so `inplace` must be False."""
        if inplace:
            raise NotImplementedError(_AT_INPLACE_ERROR)
        at = self.__props["at"] or self._update_each
        return at(a, indices) if b is None else at(a, indices, b)

    def _update_each(self, a, indices, *operands):
        jnp = _jnp()
        _check_arraylike(f"{self.__name__}.at", a, *operands)
        dtype = self._result_dtype(a, *operands)
        a = jnp.asarray(a).astype(dtype)
        operands = tuple(jnp.asarray(b).astype(dtype) for b in operands)
        indices = indices if isinstance(indices, tuple) else (indices,)
        if not indices:
            return a
        shape = np.broadcast_shapes(*(np.shape(i) for i in indices if not isinstance(i, slice)))
        if not shape:
            return a.at[indices].set(self(a.at[indices].get(), *operands))
        count = math.prod(shape)
        flat = [i if isinstance(i, slice) else jnp.broadcast_to(i, shape).ravel() for i in indices]
        operands = tuple(jnp.broadcast_to(b, shape + b.shape[len(shape):]).reshape((count,) + b.shape[len(shape):])
                         for b in operands)

        def update(n, arr):
            where = tuple(i if isinstance(i, slice) else i[n] for i in flat)
            return arr.at[where].set(self(arr.at[where].get(), *(b[n] for b in operands)))

        return control_flow.fori_loop(0, count, update, a)

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out: None = None):
        """Folds of the slices of `a` along `axis` from each index to the next (a single
        element where the next index is not larger), as NumPy's reduceat."""
        self._require_binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        reduceat = self.__props["reduceat"] or self._fold_segments
        return reduceat(a, indices, axis=axis, dtype=dtype)

    def _fold_segments(self, a, indices, axis=0, dtype=None):
        jnp = _jnp()
        _check_arraylike(f"{self.__name__}.reduceat", a, indices)
        a, indices = jnp.asarray(a), jnp.asarray(indices)
        if a.ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got {a.shape=}")
        if indices.ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got {indices.shape=}")
        dtype = a.dtype if dtype is None else dtype
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        axis = canonicalize_axis(axis, a.ndim)
        out = jnp.take(a, indices, axis=axis)
        # each segment's bounds, shaped to broadcast against `out` along `axis`
        bounds_shape = [1] * a.ndim
        bounds_shape[axis] = indices.shape[0]
        starts = indices.reshape(bounds_shape)
        ends = jnp.append(indices[1:], a.shape[axis]).reshape(bounds_shape)

        def fold(i, acc):
            inside = (i > starts) & (i < ends)
            return jnp.where(inside, self(acc, jnp.take(a, i[None], axis=axis)), acc)

        return control_flow.fori_loop(0, a.shape[axis], fold, out)

    def outer(self, A, B, /):
        """The function at every pair (a, b): shape A.shape + B.shape."""
        self._require_binary("outer")
        _check_arraylike(f"{self.__name__}.outer", A, B)
        return _outer(self, A, B)


@api.jit(static_argnums=0)
def _outer(function: ufunc, A, B):
    jnp = _jnp()
    result = vmap(vmap(function, (None, 0)), (0, None))(jnp.ravel(A), jnp.ravel(B))
    return result.reshape(np.shape(A) + np.shape(B))


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """`func`, a function of `nin` scalars returning `nout` values, as a `jnp.ufunc`."""
    return ufunc(func, nin, nout, identity=identity)


def _at_method(method: str):
    def update(a, indices, b):
        return getattr(_jnp().asarray(a).at[indices], method)(b)
    update.__name__ = f"_{method}_at"
    return update


def _reduction(fun):
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        return fun(a, axis=axis, keepdims=keepdims, initial=initial, where=where)
    return reduce


def _logical_reduction(fun):
    def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
        if initial is not None:
            raise ValueError("initial argument is not supported for logical reductions")
        return fun(a, axis=axis, keepdims=keepdims, where=where)
    return reduce


add = ufunc(ufuncs.add, 2, 1, identity=0, call=ufuncs.add, reduce=reductions.sum,
            accumulate=reductions.cumsum, at=_at_method("add"))
multiply = ufunc(ufuncs.multiply, 2, 1, identity=1, call=ufuncs.multiply, reduce=reductions.prod,
                 accumulate=reductions.cumprod, at=_at_method("multiply"))
subtract = ufunc(ufuncs.subtract, 2, 1, call=ufuncs.subtract, at=_at_method("subtract"))
maximum = ufunc(ufuncs.maximum, 2, 1, call=ufuncs.maximum, reduce=_reduction(reductions.max))
minimum = ufunc(ufuncs.minimum, 2, 1, call=ufuncs.minimum, reduce=_reduction(reductions.min))
logical_and = ufunc(ufuncs.logical_and, 2, 1, identity=True, call=ufuncs.logical_and,
                    reduce=_logical_reduction(reductions.all))
logical_or = ufunc(ufuncs.logical_or, 2, 1, identity=False, call=ufuncs.logical_or,
                   reduce=_logical_reduction(reductions.any))
logical_xor = ufunc(ufuncs.logical_xor, 2, 1, identity=False, call=ufuncs.logical_xor)
bitwise_and = ufunc(ufuncs.bitwise_and, 2, 1, identity=-1, call=ufuncs.bitwise_and)
bitwise_or = ufunc(ufuncs.bitwise_or, 2, 1, identity=0, call=ufuncs.bitwise_or)
bitwise_xor = ufunc(ufuncs.bitwise_xor, 2, 1, identity=0, call=ufuncs.bitwise_xor)
logaddexp = ufunc(ufuncs.logaddexp, 2, 1, identity=-np.inf, call=ufuncs.logaddexp)
logaddexp2 = ufunc(ufuncs.logaddexp2, 2, 1, identity=-np.inf, call=ufuncs.logaddexp2)
negative = ufunc(ufuncs.negative, 1, 1, call=ufuncs.negative)
