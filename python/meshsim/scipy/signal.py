"""meshsim.scipy.signal (as jax.scipy.signal): `detrend`, N-d convolution and correlation,
direct (on lax.conv_general_dilated) or by FFT (`fftconvolve`), and the windowed-FFT spectral
estimates (signal_spectral.py)."""
from __future__ import annotations

import numpy as np

__all__ = ["detrend", "convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "stft", "istft",
           "csd", "welch"]

_MODES = ("full", "same", "valid")


def detrend(data, axis: int = -1, type: str = "linear", bp=0, overwrite_data=None):  # noqa: A002
    """`data` minus its mean ('constant') or minus its least-squares line on each segment
    between the breakpoints `bp` ('linear'), along `axis`."""
    import meshsim.numpy as jnp
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    data = jnp.asarray(data)
    data = data.astype(jnp.result_type(data, float))
    if type == "constant":
        return data - data.mean(axis, keepdims=True)
    n = data.shape[axis]
    bounds = np.unique(np.r_[0, np.asarray(bp, dtype=int), n])
    if np.any(bounds > n):
        raise ValueError("Breakpoints must be non-negative and less than length of data along given axis.")
    moved = jnp.moveaxis(data, axis, 0)
    pieces = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        seg = moved[lo:hi]
        t = jnp.arange(1, hi - lo + 1, dtype=seg.dtype) / (hi - lo)
        a = jnp.stack([t, jnp.ones_like(t)], axis=1)
        flat = seg.reshape(hi - lo, -1)
        coef = jnp.linalg.lstsq(a, flat)[0]
        pieces.append((flat - a @ coef).reshape(seg.shape))
    return jnp.moveaxis(jnp.concatenate(pieces, axis=0), 0, axis)


def _inexact_pair(in1, in2):
    """in1 and in2 as arrays of their common inexact dtype."""
    import meshsim.numpy as jnp
    in1, in2 = jnp.asarray(in1), jnp.asarray(in2)
    dtype = jnp.result_type(in1, in2, float)
    return in1.astype(dtype), in2.astype(dtype)


def _convolve_nd(in1, in2, mode: str, precision):
    """The N-d convolution of in1 and in2 as one convolution of the larger by the flipped
    smaller (one input must be at least as large as the other in every dimension)."""
    import meshsim.numpy as jnp
    from meshsim import lax
    if mode not in _MODES:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 must have the same number of dimensions")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"zero-size arrays not supported in convolutions, got shapes {in1.shape} "
                         f"and {in2.shape}.")
    in1, in2 = _inexact_pair(in1, in2)
    larger = all(a >= b for a, b in zip(in1.shape, in2.shape))
    smaller = all(a <= b for a, b in zip(in1.shape, in2.shape))
    if not (larger or smaller):
        raise ValueError("One input must be smaller than the other in every dimension.")
    second_shape = in2.shape
    if smaller:
        in1, in2 = in2, in1
    if mode == "valid":
        padding = [(0, 0)] * in2.ndim
    elif mode == "same":
        padding = [(s - 1 - (o - 1) // 2, s - o + (o - 1) // 2) for s, o in zip(in2.shape, second_shape)]
    else:
        padding = [(s - 1, s - 1) for s in in2.shape]
    out = lax.conv_general_dilated(in1[None, None], jnp.flip(in2)[None, None], (1,) * in2.ndim, padding,
                                   precision=precision)
    return out[0, 0]


def convolve(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-d convolution of in1 and in2 ('direct'/'auto': a lax convolution; 'fft': fftconvolve)."""
    import meshsim.numpy as jnp
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method not in ("direct", "auto"):
        raise ValueError(f"Got {method=}; expected 'auto', 'fft', or 'direct'.")
    return _convolve_nd(jnp.asarray(in1), jnp.asarray(in2), mode, precision)


def correlate(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-d cross-correlation: in1 convolved with in2 flipped and conjugated."""
    import meshsim.numpy as jnp
    return convolve(in1, jnp.flip(jnp.asarray(in2).conj()), mode, precision=precision, method=method)


def _check_2d(name: str, in1, in2, boundary: str, fillvalue) -> None:
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs.")


def convolve2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0, precision=None):
    """The 2-D convolution of in1 and in2 (zero fill outside them only)."""
    import meshsim.numpy as jnp
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd(jnp.asarray(in1), jnp.asarray(in2), mode, precision)


def correlate2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0, precision=None):
    """The 2-D cross-correlation of in1 and in2, arranged as scipy.signal.correlate2d does
    when the second input is the larger."""
    import meshsim.numpy as jnp
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in1, in2 = jnp.asarray(in1), jnp.asarray(in2)
    second_larger = all(a <= b for a, b in zip(in1.shape, in2.shape))
    if mode == "valid":
        second_larger = second_larger and in1.shape != in2.shape
    if mode == "same" or not second_larger:
        return jnp.flip(_convolve_nd(jnp.flip(in1), in2.conj(), mode, precision))
    out = _convolve_nd(jnp.flip(in2), in1.conj(), mode, precision)
    return out if mode == "valid" else out.conj()


def _fftconvolve_one(in1, in2, mode: str):
    import meshsim.numpy as jnp
    from meshsim import lax
    full = tuple(a + b - 1 for a, b in zip(in1.shape, in2.shape))
    if mode == "valid":
        larger = all(a >= b for a, b in zip(in1.shape, in2.shape))
        smaller = all(a <= b for a, b in zip(in1.shape, in2.shape))
        if not (larger or smaller):
            raise ValueError("For 'valid' mode, One input must be at least as large as the other in "
                             "every dimension.")
        if smaller:
            in1, in2 = in2, in1
    if all(a == 1 or b == 1 for a, b in zip(in1.shape, in2.shape)):
        product = in1 * in2
    else:
        complex_input = jnp.iscomplexobj(in1)
        fft = jnp.fft.fftn if complex_input else jnp.fft.rfftn
        ifft = jnp.fft.ifftn if complex_input else jnp.fft.irfftn
        product = ifft(fft(in1, full) * fft(in2, full), full)
    out = {"full": full, "same": in1.shape,
           "valid": tuple(a - b + 1 for a, b in zip(in1.shape, in2.shape))}[mode]
    return lax.dynamic_slice(product, tuple((f - o) // 2 for f, o in zip(full, out)), out)


def fftconvolve(in1, in2, mode: str = "full", axes=None):
    """The N-d convolution of in1 and in2 by FFT, over `axes` (all by default; the other axes
    must agree and are mapped over)."""
    import meshsim
    import meshsim.numpy as jnp
    from meshsim._src.lax.structural import canonicalize_axis
    from meshsim._src.numpy.creation import _check_arraylike
    _check_arraylike("fftconvolve", in1, in2)
    in1, in2 = _inexact_pair(in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    if mode not in _MODES:
        raise ValueError("mode must be one of ['same', 'full', 'valid']")

    def one(a, b):
        return _fftconvolve_one(a, b, mode)
    if axes is None:
        return one(in1, in2)
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    axes = tuple(canonicalize_axis(ax, in1.ndim) for ax in axes)
    mapped = sorted(set(range(in1.ndim)) - set(axes))
    if any(in1.shape[i] != in2.shape[i] for i in mapped):
        raise ValueError(f"mapped axes must have same shape; got {in1.shape=} {in2.shape=} {axes=}")
    for ax in mapped:
        one = meshsim.vmap(one, in_axes=ax, out_axes=ax)
    return one(in1, in2)


from meshsim.scipy.signal_spectral import csd, istft, stft, welch  # noqa: E402
