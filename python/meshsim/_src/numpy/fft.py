"""jax.numpy.fft: the transforms over chosen axes with NumPy's `s`/`n`
cropping or zero-padding and JAX's `norm` modes ("backward", "ortho",
"forward"), all through the `fft` primitive (meshsim.lax.fft); more than three
transformed axes run as transforms of at most three, as XLA requires. Also
the sample frequencies and the zero-frequency shifts."""
from __future__ import annotations

import operator
from typing import Sequence

import numpy as np

from meshsim._src import core
from meshsim._src.lax.fft import FftType, fft as lax_fft

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _jnp():
    from meshsim._src.numpy import namespace as jnp
    return jnp


def _norm_factor(lengths, func_name: str, norm: str, dtype):
    """What the unnormalised transform is multiplied by for `norm`, computed
    in the result's dtype."""
    jnp = _jnp()
    inverse = func_name.startswith("i")
    n = jnp.prod(jnp.array(lengths, dtype=dtype))
    if norm == "ortho":
        return jnp.sqrt(n) if inverse else 1 / jnp.sqrt(n)
    if norm == "forward":
        return n if inverse else 1 / n
    raise ValueError(f'Invalid norm value {norm}; should be "backward","ortho" or "forward".')


def _transform_trailing(x, fft_type: FftType, lengths):
    """The transform of the trailing len(lengths) axes, at most three per primitive."""
    jnp = _jnp()
    k = len(lengths)
    if k <= 3:
        return lax_fft(x, fft_type, tuple(lengths))
    inner = 2 if k == 4 else 3
    outer_axes = tuple(range(x.ndim - k, x.ndim - inner))
    moved = tuple(range(x.ndim - k + inner, x.ndim))
    if fft_type in (FftType.FFT, FftType.RFFT):
        x = lax_fft(x, fft_type, tuple(lengths[-inner:]))
        x = jnp.moveaxis(x, outer_axes, moved)
        x = _transform_trailing(x, FftType.FFT, lengths[:-inner])
        return jnp.moveaxis(x, moved, outer_axes)
    x = jnp.moveaxis(x, outer_axes, moved)
    x = _transform_trailing(x, FftType.IFFT, lengths[:-inner])
    x = jnp.moveaxis(x, moved, outer_axes)
    return lax_fft(x, fft_type, tuple(lengths[-inner:]))


def _check_arraylike(name: str, a):
    if isinstance(a, (list, tuple)):
        raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at position 0.")
    return core.asarray_value(a)


def _transform(func_name: str, fft_type: FftType, a, s, axes, norm):
    jnp = _jnp()
    full_name = f"jax.numpy.fft.{func_name}"
    x = _check_arraylike(full_name, a)
    if s is not None:
        s = tuple(operator.index(n) for n in s)
        if any(n <= 0 for n in s):
            raise ValueError("Shape should be positive.")
        if axes is not None and len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    given_axes = axes
    if axes is None:
        axes = range(x.ndim) if s is None else range(x.ndim - len(s), x.ndim)
    axes = tuple(axes)
    if len(axes) != len(set(axes)):
        raise ValueError(f"{full_name} does not support repeated axes. Got axes {axes}.")
    if given_axes is not None:
        trailing = tuple(range(x.ndim - len(axes), x.ndim))
        x = jnp.moveaxis(x, axes, trailing)
        axes = trailing
    if s is not None:
        sizes = list(x.shape)
        for axis, n in zip(axes, s):
            sizes[axis] = n
        if fft_type == FftType.IRFFT:
            sizes[-1] = sizes[-1] // 2 + 1
        x = x[tuple(slice(n) for n in sizes)]
        x = jnp.pad(x, [(0, n - m) for n, m in zip(sizes, x.shape)])
        lengths = list(s)
    elif fft_type == FftType.IRFFT:
        lengths = [x.shape[axis] for axis in axes[:-1]]
        if axes:
            lengths.append(max(0, 2 * (x.shape[axes[-1]] - 1)))
    else:
        lengths = [x.shape[axis] for axis in axes]
    out = _transform_trailing(x, fft_type, lengths)
    if norm is not None and norm != "backward":
        out = out * _norm_factor(lengths, func_name, norm, out.dtype)
    if given_axes is not None:
        out = jnp.moveaxis(out, axes, given_axes)
    return out


def _check_single_axis(func_name: str, axis):
    if isinstance(axis, (list, tuple)):
        full_name = f"jax.numpy.fft.{func_name}"
        raise ValueError(f"{full_name} does not support multiple axes. Please use {full_name}n. "
                         f"Got axis = {axis!r}.")


def _transform_1d(func_name: str, fft_type: FftType, a, n, axis, norm):
    _check_single_axis(func_name, axis)
    return _transform(func_name, fft_type, a, None if n is None else [n], None if axis is None else [axis], norm)


def _transform_2d(func_name: str, fft_type: FftType, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{func_name} only supports 2 axes. Got axes = {axes!r}.")
    return _transform(func_name, fft_type, a, s, axes, norm)


def fft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    return _transform_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    return _transform_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    return _transform_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    return _transform_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The real spectrum of a Hermitian-symmetric signal given by its first half."""
    jnp = _jnp()
    conj_a = jnp.conj(a)
    _check_single_axis("hfft", axis)
    length = (conj_a.shape[axis] - 1) * 2 if n is None else n
    return _transform_1d("hfft", FftType.IRFFT, conj_a, n, axis, norm) * length


def ihfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    jnp = _jnp()
    _check_single_axis("ihfft", axis)
    x = jnp.asarray(a)
    length = x.shape[axis] if n is None else n
    return jnp.conj(_transform_1d("ihfft", FftType.RFFT, x, n, axis, norm)) * (1 / length)


def fft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    return _transform_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    return _transform_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    return _transform_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    return _transform_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


def fftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None):
    return _transform("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None):
    return _transform("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None):
    return _transform("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None):
    return _transform("irfftn", FftType.IRFFT, a, s, axes, norm)


def _check_freq_args(func_name: str, n, d):
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jax.numpy.fft.{func_name} only takes an int. Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jax.numpy.fft.{func_name} only takes a single value. "
                         f"Got d = {list(d)}.")


def _default_float():
    return core.canonicalize_dtype(np.float64)


def fftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """The sample frequencies [0, 1, ..., -2, -1] / (d*n) of an n-point FFT."""
    jnp = _jnp()
    _check_freq_args("fftfreq", n, d)
    out_dtype = np.dtype(dtype) if dtype is not None else _default_float()
    work = core.canonicalize_dtype(out_dtype if out_dtype.kind in "fc" else _default_float())
    if work.kind == "c":
        work = np.dtype(np.float64 if work == np.complex128 else np.float32)
    i = jnp.arange(n, dtype=work, device=device)
    k = (i + n // 2) % n - n // 2
    return (k.astype(work) / jnp.array(d * n, dtype=work, device=device)).astype(out_dtype)


def rfftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """The sample frequencies [0, 1, ..., n//2] / (d*n) of an n-point real FFT."""
    jnp = _jnp()
    _check_freq_args("rfftfreq", n, d)
    dtype = dtype if dtype is not None else _default_float()
    k = jnp.arange(0, n // 2 + 1, dtype=dtype)
    out = k / jnp.array(d * n, dtype=dtype)
    return out if device is None else jnp.asarray(out, device=device)


def _shift(name: str, x, axes, sign: int):
    jnp = _jnp()
    x = _check_arraylike(name, x)
    if axes is None:
        axes = tuple(range(x.ndim))
        shift = [sign * (n // 2) for n in x.shape]
    elif isinstance(axes, int):
        shift = sign * (x.shape[axes] // 2)
    else:
        shift = [sign * (x.shape[axis] // 2) for axis in axes]
    return jnp.roll(x, shift, axes)


def fftshift(x, axes=None):
    """`x` rolled so that the zero frequency is at the centre of each axis."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of fftshift."""
    return _shift("ifftshift", x, axes, -1)
