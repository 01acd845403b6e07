"""jax.scipy.fft: the type-2 discrete cosine transform and its inverse
(`dct`, `dctn`, `idct`, `idctn`, norm None/"backward" or "ortho"), computed
as JAX computes them: an FFT of the even/odd-interleaved signal rotated by
quarter-sample twiddles (Makhoul's algorithm), so results agree with JAX's to
rounding."""
from __future__ import annotations

import math
import operator
from typing import Sequence

import numpy as np

from meshsim._src import core

__all__ = ["dct", "dctn", "idct", "idctn"]


def _modules():
    from meshsim._src.lax import namespace as lax
    from meshsim._src.numpy import namespace as jnp
    return lax, jnp


def _check(name: str, x, kind: int, norm):
    if isinstance(x, (list, tuple)):
        raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(x)} at position 0.")
    if kind != 2:
        raise NotImplementedError("Only DCT type 2 is implemented.")
    if norm is not None and norm not in ("backward", "ortho"):
        raise ValueError(f"jax.scipy.fft.{name}: norm={norm!r} is not implemented")
    return core.asarray_value(x)


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def _others(ndim: int, axis: int):
    return [a for a in range(ndim) if a != axis]


def _twiddle(n: int, k):
    """exp(-i pi k / (2n)), complex."""
    _, jnp = _modules()
    n_c, k_c = jnp.asarray(n), k
    dtype = jnp.result_type(n_c, k_c, jnp.complex64)
    return jnp.exp(-0.5j * np.pi * k_c.astype(dtype) / n_c.astype(dtype))


def _interleave(x, axis: int):
    """The even samples, then the odd ones reversed."""
    lax, _ = _modules()
    evens = lax.slice_in_dim(x, None, None, 2, axis)
    odds = lax.rev(lax.slice_in_dim(x, 1, None, 2, axis), (axis,))
    return lax.concatenate([evens, odds], axis)


def _deinterleave(x, axis: int):
    lax, jnp = _modules()
    half = math.ceil(x.shape[axis] / 2)
    whole = slice(None)
    at = lambda s: tuple(s if i == axis else whole for i in range(x.ndim))  # noqa: E731
    out = jnp.zeros(x.shape, dtype=x.dtype)
    out = out.at[at(slice(None, None, 2))].set(x[at(slice(None, half))])
    return out.at[at(slice(1, None, 2))].set(lax.rev(x[at(slice(half, None))], (axis,)))


def _ortho_scale(x, axis: int):
    """Divides bin 0 by sqrt(4n) and the others by sqrt(2n)."""
    lax, _ = _modules()
    n = x.shape[axis]
    factor = lax.concatenate([lax.full((1,), 4, x.dtype), lax.full((n - 1,), 2, x.dtype)], 0)
    factor = lax.expand_dims(factor, _others(x.ndim, axis))
    return x / lax.sqrt(factor * n)


def _resize(x, sizes: dict):
    """Crops or zero-pads the axes named in `sizes` at their ends."""
    lax, jnp = _modules()
    config = [(0, sizes[a] - x.shape[a] if a in sizes else 0, 0) for a in range(x.ndim)]
    return lax.pad(x, jnp.array(0, x.dtype), config)


def _per_part(f, x, **kwargs):
    """`f` of a complex input: of its real and imaginary parts separately."""
    lax, _ = _modules()
    return lax.complex(f(x.real, **kwargs), f(x.imag, **kwargs))


def dct(x, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None):  # noqa: A002
    """The type-2 DCT along `axis` (zero-padded or cropped to `n`)."""
    lax, jnp = _modules()
    x = _check("dct", x, type, norm)
    if x.dtype.kind == "c":
        return _per_part(dct, x, type=type, n=n, axis=axis, norm=norm)
    axis = _axis(axis, x.ndim)
    if n is not None:
        x = _resize(x, {axis: n})
    N = x.shape[axis]
    V = jnp.fft.fft(_interleave(x, axis), axis=axis)
    k = lax.expand_dims(jnp.arange(N, dtype=V.real.dtype), _others(x.ndim, axis))
    out = 2 * (V * _twiddle(N, k)).real
    return _ortho_scale(out, axis) if norm == "ortho" else out


def _dct2(x, axes, norm):
    """The 2-D DCT from one 2-D FFT."""
    lax, jnp = _modules()
    a1, a2 = (_axis(a, x.ndim) for a in axes)
    n1, n2 = x.shape[a1], x.shape[a2]
    V = jnp.fft.fftn(_interleave(_interleave(x, a1), a2), axes=axes)
    k1 = lax.expand_dims(jnp.arange(n1, dtype=V.dtype), _others(x.ndim, a1))
    k2 = lax.expand_dims(jnp.arange(n2, dtype=V.dtype), _others(x.ndim, a2))
    mirrored = jnp.roll(jnp.flip(V, axis=a2), shift=1, axis=a2)
    out = 2 * (_twiddle(n1, k1) * (_twiddle(n2, k2) * V + _twiddle(n2, -k2) * mirrored)).real
    return _ortho_scale(_ortho_scale(out, a1), a2) if norm == "ortho" else out


def _axes_and_sizes(x, s, axes):
    if s is not None:
        try:
            s = list(s)
        except TypeError:
            s = [operator.index(s)]
        if len(s) > x.ndim:
            raise ValueError(f"s must have at most x.ndim ({x.ndim}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
    else:
        axes = tuple(_axis(a, x.ndim) for a in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"repeated axis: {axes}")
    return s, axes


def _over_axes(name: str, one_axis, many_axes, x, kind, s, axes, norm):
    """What dctn and idctn share: a complex input transforms by parts, a single
    axis by the 1-D transform, several axes by `many_axes(x, axes)` after
    cropping or zero-padding to `s`."""
    x = _check(name, x, kind, norm)
    if x.dtype.kind == "c":
        return _per_part(lambda part: _over_axes(name, one_axis, many_axes, part, kind, s, axes, norm), x)
    s, axes = _axes_and_sizes(x, s, axes)
    if len(axes) == 1:
        return one_axis(x, n=s[0] if s is not None else None, axis=axes[0], norm=norm)
    if s is not None:
        x = _resize(x, dict(zip(axes, s)))
    return many_axes(x, axes)


def dctn(x, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,  # noqa: A002
         norm: str | None = None):
    """The type-2 DCT over several axes, two at a time."""
    def pairs(x, axes):
        if len(axes) == 2:
            return _dct2(x, axes, norm)
        for i in range(0, len(axes), 2):
            x = dctn(x, axes=axes[i:i + 2], norm=norm)
        return x
    return _over_axes("dctn", dct, pairs, x, type, s, axes, norm)


def idct(x, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None):  # noqa: A002
    """The inverse of the type-2 DCT along `axis` (a type-3 DCT, scaled)."""
    lax, jnp = _modules()
    x = _check("idct", x, type, norm)
    if x.dtype.kind == "c":
        return _per_part(idct, x, type=type, n=n, axis=axis, norm=norm)
    axis = _axis(axis, x.ndim)
    if n is not None:
        x = _resize(x, {axis: n})
    N = x.shape[axis]
    if x.dtype.kind not in "fc":
        x = x.astype(core.canonicalize_dtype(np.float64))
    if norm is None or norm == "backward":
        x = _ortho_scale(x, axis)
    x = _ortho_scale(x, axis)
    k = lax.expand_dims(jnp.arange(N, dtype=x.dtype), _others(x.ndim, axis))
    w = _twiddle(N, k)
    x = x.astype(w.dtype) / w * 2 * N
    return _deinterleave(jnp.fft.ifft(x, axis=axis).real, axis)


def idctn(x, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,  # noqa: A002
          norm: str | None = None):
    """The inverse of dctn: idct along each axis."""
    def each(x, axes):
        for axis in axes:
            x = idct(x, axis=axis, norm=norm)
        return x
    return _over_axes("idctn", idct, each, x, type, s, axes, norm)
