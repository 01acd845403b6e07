"""meshsim.numpy.linalg: norms and the array-API matrix functions (as jax.numpy.linalg).

Written as JAX writes them from jnp reductions and products; the orders
2/-2/'nuc' and negative powers use the decompositions of `decompositions`."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import core
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy import decompositions
from meshsim._src.numpy.creation import _check_arraylike
from meshsim._src.numpy.promotion import promote_dtypes_inexact

__all__ = ["norm", "matrix_norm", "vector_norm", "outer", "matmul", "tensordot", "trace", "diagonal",
           "matrix_transpose", "vecdot", "cross", "matrix_power"]


def _array(name: str, x):
    _check_arraylike(name, x)
    return core.asarray_value(x)


def _sum_of_squares(x, axis, keepdims):
    """The 2-norm: sqrt(sum |x|^2), a real result for complex x."""
    squares = jnp.real(x * jnp.conj(x)) if jnp.iscomplexobj(x) else x * x
    return jnp.sqrt(jnp.sum(squares, axis=axis, keepdims=keepdims))


def norm(x, ord=None, axis=None, keepdims: bool = False):  # noqa: A002 (NumPy's name)
    """Vector norms (one axis) and matrix norms (two axes) of x."""
    (x,) = promote_dtypes_inexact(_array("jnp.linalg.norm", x))
    ndim = x.ndim
    if axis is None:
        if ord is None:  # NumPy: any rank, the 2-norm of the flattened array
            return _sum_of_squares(x, None, keepdims)
        axis = tuple(range(ndim))
    elif isinstance(axis, tuple):
        axis = tuple(canonicalize_axis(a, ndim) for a in axis)
    else:
        axis = (canonicalize_axis(axis, ndim),)
    if len(axis) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axis, keepdims=keepdims)
    if len(axis) != 2:
        raise ValueError(f"Improper number of axes for norm: axis={axis}. Pass one axis to compute a "
                         "vector-norm, or two axes to compute a matrix-norm.")
    row_axis, col_axis = axis
    if ord is None or ord in ("f", "fro"):
        return _sum_of_squares(x, axis, keepdims)
    if ord in (1, -1):
        if not keepdims and col_axis > row_axis:
            col_axis -= 1
        sums = jnp.sum(jnp.abs(x), axis=row_axis, keepdims=keepdims)
        return (jnp.max(sums, axis=col_axis, keepdims=keepdims, initial=0) if ord == 1
                else jnp.min(sums, axis=col_axis, keepdims=keepdims))
    if ord in (np.inf, -np.inf):
        if not keepdims and row_axis > col_axis:
            row_axis -= 1
        sums = jnp.sum(jnp.abs(x), axis=col_axis, keepdims=keepdims)
        return (jnp.max(sums, axis=row_axis, keepdims=keepdims, initial=0) if ord == np.inf
                else jnp.min(sums, axis=row_axis, keepdims=keepdims))
    if ord in ("nuc", 2, -2):
        s = decompositions.svdvals(jnp.moveaxis(x, (row_axis, col_axis), (-2, -1)))
        reduce = {"nuc": jnp.sum, 2: jnp.max, -2: jnp.min}[ord]
        out = reduce(s, axis=-1)
        if keepdims:
            out = jnp.expand_dims(out, tuple(sorted((row_axis % ndim, col_axis % ndim))))
        return out
    raise ValueError(f"Invalid order '{ord}' for matrix norm.")


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):  # noqa: A002
    """norm over the last two axes."""
    return norm(_array("jnp.linalg.matrix_norm", x), ord=ord, keepdims=keepdims, axis=(-2, -1))


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):  # noqa: A002
    """The ord-norm of the vectors along axis (all of x if None)."""
    x = _array("jnp.linalg.vector_norm", x)
    if ord is None or (not isinstance(ord, str) and ord == 2):
        return _sum_of_squares(x, axis, keepdims)
    if isinstance(ord, str):
        msg = f"Invalid order '{ord}' for vector norm."
        if ord == "inf":
            msg += "Use 'jax.numpy.inf' instead."
        if ord == "-inf":
            msg += "Use '-jax.numpy.inf' instead."
        raise ValueError(msg)
    if ord == np.inf:
        return jnp.max(jnp.abs(x), axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return jnp.min(jnp.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, dtype=jnp.finfo(x.dtype).dtype, axis=axis, keepdims=keepdims)
    if ord == 1:
        return jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims)
    abs_x = jnp.abs(x)
    ord_arr = np.asarray(ord, abs_x.dtype)
    out = jnp.sum(abs_x ** ord_arr, axis=axis, keepdims=keepdims)
    return jnp.power(out, np.asarray(1. / ord_arr, abs_x.dtype))


def outer(x1, x2, /):
    """The outer product of two vectors."""
    x1, x2 = _array("jnp.linalg.outer", x1), _array("jnp.linalg.outer", x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={x1.ndim} x2.ndim={x2.ndim}")
    return x1[:, None] * x2[None, :]


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    return jnp.matmul(_array("jnp.linalg.matmul", x1), _array("jnp.linalg.matmul", x2), precision=precision,
                      preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    return jnp.tensordot(_array("jnp.linalg.tensordot", x1), _array("jnp.linalg.tensordot", x2), axes=axes,
                         precision=precision, preferred_element_type=preferred_element_type)


def trace(x, /, *, offset: int = 0, dtype=None):
    """The traces of the matrices in the last two axes."""
    return jnp.trace(_array("jnp.linalg.trace", x), offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset: int = 0):
    """The diagonals of the matrices in the last two axes."""
    return jnp.diagonal(_array("jnp.linalg.diagonal", x), offset=offset, axis1=-2, axis2=-1)


def matrix_transpose(x, /):
    """x with its last two axes swapped."""
    x = _array("jnp.linalg.matrix_transpose", x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions; got ndim={x.ndim}")
    return jnp.swapaxes(x, -1, -2)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    return jnp.vecdot(_array("jnp.linalg.vecdot", x1), _array("jnp.linalg.vecdot", x2), axis=axis,
                      precision=precision, preferred_element_type=preferred_element_type)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along axis."""
    x1, x2 = _array("jnp.linalg.outer", x1), _array("jnp.linalg.outer", x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they have "
                         f"x1.shape[axis]={x1.shape[axis]} and x2.shape[axis]={x2.shape[axis]}")
    return jnp.cross(x1, x2, axis=axis)


def matrix_power(a, n: int):
    """a @ a @ ... (n times) by repeated squaring; the identity for n == 0."""
    arr = _array("jnp.linalg.matrix_power", a)
    if arr.ndim < 2:
        raise TypeError(f"{arr.ndim}-dimensional array given. Array must be at least two-dimensional")
    if arr.shape[-2] != arr.shape[-1]:
        raise TypeError("Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}") from err
    if n == 0:
        return jnp.broadcast_to(jnp.eye(arr.shape[-2], dtype=arr.dtype), arr.shape)
    if n < 0:
        arr, n = decompositions.inv(arr), -n
    if n == 1:
        return arr
    if n == 2:
        return arr @ arr
    if n == 3:
        return (arr @ arr) @ arr
    z = result = None
    while n > 0:
        z = arr if z is None else z @ z
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else result @ z
    return result
