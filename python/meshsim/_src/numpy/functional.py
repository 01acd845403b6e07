"""jax.numpy's functions built on other functions or transforms:
`apply_along_axis`/`apply_over_axes` (vmap), `gradient`, `unwrap`,
`mask_indices`, `poly` (of roots), `angle`, `iscomplex`, printing helpers and
NumPy's type names that jax.numpy re-exports."""
from __future__ import annotations

import numpy as np
from numpy import character, flexible, object_  # noqa: F401  (jax.numpy re-exports them)
from numpy import get_printoptions, printoptions, set_printoptions  # noqa: F401
from numpy.exceptions import ComplexWarning  # noqa: F401

from meshsim._src import api

__all__ = ["apply_along_axis", "apply_over_axes", "gradient", "unwrap", "mask_indices", "poly",
           "angle", "iscomplex", "array_str", "array_repr", "get_printoptions", "printoptions",
           "set_printoptions", "character", "flexible", "object_", "ComplexWarning",
           "euler_gamma"]

euler_gamma = 0.5772156649015329


def _jnp():
    from meshsim._src.numpy import namespace as jnp
    return jnp


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """`func1d` applied to every 1-d slice of `arr` along `axis` (vmapped over
    the other axes); its result's dimensions take the place of `axis`."""
    from meshsim._src.vmap import vmap
    arr = _jnp().asarray(arr)
    ndim = arr.ndim
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    axis = axis % ndim

    def func(x):
        return func1d(x, *args, **kwargs)
    for i in range(1, ndim - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func, a, axes):
    """`func(a, axis)` applied for each axis in turn, keeping the axis (as size 1)."""
    jnp = _jnp()
    a = jnp.asarray(a)
    for axis in axes:
        b = func(a, axis)
        if b.ndim == a.ndim:
            a = b
        elif b.ndim == a.ndim - 1:
            a = jnp.expand_dims(b, axis)
        else:
            raise ValueError("function is not returning an array of the correct shape")
    return a


def _gradient_along(f, spacing, axis: int):
    jnp = _jnp()
    n = f.shape[axis]
    if n < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "2 elements are required.")

    def sl(start, stop):
        index = [slice(None)] * f.ndim
        index[axis] = slice(start, stop)
        return f[tuple(index)]
    if jnp.ndim(spacing) == 0:
        h = spacing
        interior = (sl(2, None) - sl(None, -2)) / (2 * h)
        first = (sl(1, 2) - sl(0, 1)) / h
        last = (sl(-1, None) - sl(-2, -1)) / h
    else:
        x = jnp.asarray(spacing)
        dx = jnp.diff(x)
        shape = [1] * f.ndim
        shape[axis] = -1
        dx1 = dx[:-1].reshape(shape)
        dx2 = dx[1:].reshape(shape)
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        interior = a * sl(None, -2) + b * sl(1, -1) + c * sl(2, None)
        first = (sl(1, 2) - sl(0, 1)) / dx[0]
        last = (sl(-1, None) - sl(-2, -1)) / dx[-1]
    return jnp.concatenate([first, interior, last], axis=axis)


def gradient(f, *varargs, axis=None, edge_order=None):
    """Central differences inside, one-sided at the edges, along each of `axis`
    (all axes by default); spacings are scalars or coordinate arrays."""
    jnp = _jnp()
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    f = jnp.asarray(f)
    if not jnp.issubdtype(f.dtype, jnp.inexact):
        f = f.astype(jnp.result_type(f.dtype, float))
    axes = tuple(range(f.ndim)) if axis is None else (
        (axis,) if isinstance(axis, int) else tuple(axis))
    axes = tuple(a % f.ndim for a in axes)
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and jnp.ndim(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("Invalid number of spacing arguments %d" % len(varargs))
    out = [_gradient_along(f, h, a) for h, a in zip(spacings, axes)]
    return out[0] if len(out) == 1 else out


def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """`p` with jumps larger than `discont` along `axis` taken modulo `period`."""
    jnp = _jnp()
    p = jnp.asarray(p)
    if not jnp.issubdtype(p.dtype, jnp.inexact):
        p = p.astype(jnp.result_type(p.dtype, float))
    dd = jnp.diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    interval_high = period / 2
    ddmod = jnp.mod(dd + interval_high, period) - interval_high
    ddmod = jnp.where((ddmod == -interval_high) & (dd > 0), interval_high, ddmod)
    correction = jnp.where(jnp.abs(dd) < discont, 0, ddmod - dd)
    axis = axis % p.ndim
    first = [slice(None)] * p.ndim
    first[axis] = slice(0, 1)
    rest = [slice(None)] * p.ndim
    rest[axis] = slice(1, None)
    return jnp.concatenate([p[tuple(first)],
                            p[tuple(rest)] + jnp.cumsum(correction, axis=axis)], axis=axis)


def mask_indices(n: int, mask_func, k: int = 0, *, size=None):
    """The indices where `mask_func(ones((n, n)), k)` is nonzero."""
    jnp = _jnp()
    return jnp.nonzero(mask_func(jnp.ones((n, n), dtype=int), k), size=size)


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots."""
    jnp = _jnp()
    roots = jnp.asarray(seq_of_zeros)
    if roots.ndim != 1:
        raise NotImplementedError("jnp.poly of a matrix (its characteristic polynomial needs "
                                  "eigenvalues) is not supported yet")
    if not jnp.issubdtype(roots.dtype, jnp.inexact):
        roots = roots.astype(jnp.result_type(roots.dtype, float))
    coeffs = jnp.ones(1, roots.dtype)
    for i in range(roots.shape[0]):
        coeffs = jnp.convolve(coeffs, jnp.stack([jnp.ones((), roots.dtype), -roots[i]]), mode="full")
    return coeffs


@api.jitted_when_traced(static_argnames=("deg",))
def angle(z, deg: bool = False):
    """The angle of each element in the complex plane (0 or pi for reals)."""
    jnp = _jnp()
    z = jnp.asarray(z)
    re, im = jnp.real(z), jnp.imag(z)
    dtype = jnp.result_type(re.dtype, float) if not jnp.issubdtype(re.dtype, jnp.inexact) else re.dtype
    out = jnp.arctan2(im.astype(dtype), re.astype(dtype))
    return jnp.degrees(out) if deg else out


def iscomplex(x):
    """Whether each element has a nonzero imaginary part."""
    jnp = _jnp()
    i = jnp.imag(jnp.asarray(x))
    return i != jnp.zeros_like(i)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    return repr(arr)
