"""Windowed-FFT spectral estimates of meshsim.scipy.signal, as jax.scipy.signal computes them:
`stft`, `istft`, `csd` and `welch` (SciPy's algorithms with JAX's defaults: a string window
without `nperseg` spans the whole input; complex input is two-sided)."""
from __future__ import annotations

import operator
import warnings

import numpy as np


def _jnp():
    import meshsim.numpy as jnp
    return jnp


def _hann(n: int, dtype):
    """The periodic Hann window, computed in the default float type as JAX does."""
    jnp = _jnp()
    win = jnp.array([1.0]) if n == 1 else jnp.sin(jnp.linspace(0, np.pi, n, endpoint=False)) ** 2
    return jnp.asarray(win, dtype=dtype)


def _named_window(window, n: int, dtype):
    if isinstance(window, str) and window == "hann":
        return _hann(n, dtype)
    try:
        from scipy.signal import get_window
    except ImportError as err:
        raise ImportError(f"scipy must be available to use window={window!r}") from err
    return _jnp().asarray(get_window(window, n), dtype=dtype)


def _window_and_length(window, nperseg, input_length: int, dtype):
    """The window array and the segment length (a named window without `nperseg` spans the
    input; a longer `nperseg` is cut to it with a warning)."""
    jnp = _jnp()
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else int(nperseg)
        if n > input_length:
            warnings.warn(f"nperseg={n} is greater than input_length={input_length}, "
                          f"using nperseg={input_length}")
            n = input_length
        return _named_window(window, n, dtype), n
    win = jnp.asarray(window, dtype=dtype)
    n = win.size if nperseg is None else int(nperseg)
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    if input_length < win.size:
        raise ValueError("window is longer than input signal")
    if n != win.size:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, n


def _odd_extension(x, n: int):
    jnp = _jnp()
    if n < 1:
        return x
    if n > x.shape[-1] - 1:
        raise ValueError(f"The extension length n ({n}) is too big. "
                         f"It must not exceed x.shape[axis]-1, which is {x.shape[-1] - 1}.")
    left, right = x[..., :1], x[..., -1:]
    return jnp.concatenate((2 * left - jnp.flip(x[..., 1:n + 1], -1), x,
                            2 * right - jnp.flip(x[..., -(n + 1):-1], -1)), axis=-1)


def _extended(x, boundary, n: int):
    jnp = _jnp()
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    if boundary is None:
        return x
    if boundary == "odd":
        return _odd_extension(x, n)
    if boundary == "zeros":
        return jnp.pad(x, widths, "constant", constant_values=0.0)
    return jnp.pad(x, widths, {"even": "reflect", "constant": "edge"}[boundary])


_BOUNDARIES = ("even", "odd", "constant", "zeros", None)


def _segments_transformed(x, win, detrend_func, nperseg: int, noverlap: int, nfft, two_sided: bool):
    """FFTs of the windowed, detrended segments of x's last axis: (..., segments, frequencies)."""
    jnp = _jnp()
    if x.dtype.kind == "i":
        x = x.astype(win.dtype)
    if nperseg == 1 and noverlap == 0:
        segments = x[..., np.newaxis]
    else:
        starts = np.arange(0, x.shape[-1] - nperseg + 1, nperseg - noverlap)
        segments = x[..., starts[:, None] + np.arange(nperseg)[None, :]]
    segments = detrend_func(segments)
    if jnp.iscomplexobj(win):
        segments = segments.astype(jnp.result_type(segments.dtype, np.complex64))
    segments = win.reshape((1,) * (segments.ndim - 1) + (nperseg,)) * segments
    return jnp.fft.fft(segments, n=nfft) if two_sided else jnp.fft.rfft(segments.real, n=nfft)


def _concrete_int(value, what: str) -> int:
    from meshsim._src import core, errors
    if isinstance(value, core.Tracer):
        raise errors.ConcretizationTypeError(value, f"The problem arose with the {what} argument.")
    return int(value) if isinstance(value, float) else operator.index(value)


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend_type, return_onesided, scaling, axis,
              mode, boundary=None, padded=False):
    """(frequencies, segment times, per-segment spectra) of x (with y: the cross spectra)."""
    from meshsim._src.lax.structural import canonicalize_axis
    from meshsim.scipy.signal import detrend
    jnp = _jnp()
    if mode not in ("psd", "stft"):
        raise ValueError(f"Unknown value for mode {mode}, must be one of: ('psd', 'stft')")
    if boundary not in _BOUNDARIES:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: {list(_BOUNDARIES)}")
    x = jnp.asarray(x)
    axis = canonicalize_axis(_concrete_int(axis, "axis"), x.ndim)
    inexact = jnp.promote_types(x.dtype, jnp.float32) if x.dtype.kind in "biu" else x.dtype
    if y is None:
        x = x.astype(inexact)
        outer = x.shape[:axis] + x.shape[axis + 1:]
    else:
        if mode != "psd":
            raise ValueError("two-argument mode is available only when mode=='psd'")
        y = jnp.asarray(y)
        common = jnp.result_type(x, y)
        common = jnp.promote_types(common, jnp.float32) if np.dtype(common).kind in "biu" else common
        x, y = x.astype(common), y.astype(common)
        if x.ndim != y.ndim:
            raise ValueError("two-arguments must have the same rank ({x.ndim} vs {y.ndim}).")
        try:
            outer = jnp.broadcast_shapes(x.shape[:axis] + x.shape[axis + 1:], y.shape[:axis] + y.shape[axis + 1:])
        except ValueError as err:
            raise ValueError("x and y cannot be broadcast together.") from err
    result_dtype = jnp.result_type(x.dtype, np.complex64)
    freq_dtype = np.finfo(result_dtype).dtype
    if nperseg is not None:
        nperseg = _concrete_int(nperseg, "nperseg")
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    win, nperseg = _window_and_length(window, nperseg, x.shape[axis], x.dtype)
    noverlap = nperseg // 2 if noverlap is None else _concrete_int(noverlap, "noverlap")
    nfft = nperseg if nfft is None else _concrete_int(nfft, "nfft")
    if x.size == 0 or (y is not None and y.size == 0):
        length = x.shape[axis] if y is None else min(x.shape[axis], y.shape[axis])
        shape = outer[:axis] + (length,) + outer[axis:] if y is not None else x.shape
        return jnp.zeros(shape, freq_dtype), jnp.zeros(shape, freq_dtype), jnp.zeros(shape, result_dtype)
    x = jnp.moveaxis(x, axis, -1)
    if y is not None:
        y = jnp.moveaxis(y, axis, -1) if y.ndim > 1 else y
        short = x.shape[-1] - y.shape[-1]
        if short < 0:
            x = jnp.concatenate((x, jnp.zeros(x.shape[:-1] + (-short,), x.dtype)), -1)
        elif short > 0:
            y = jnp.concatenate((y, jnp.zeros(y.shape[:-1] + (short,), x.dtype)), -1)
    if nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    step = nperseg - noverlap
    if boundary is not None:
        x = _extended(x, boundary, nperseg // 2)
        y = None if y is None else _extended(y, boundary, nperseg // 2)
    if padded:
        extra = (-(x.shape[-1] - nperseg) % step) % nperseg
        x = jnp.concatenate((x, jnp.zeros(x.shape[:-1] + (extra,), x.dtype)), -1)
        y = None if y is None else jnp.concatenate((y, jnp.zeros(y.shape[:-1] + (extra,), x.dtype)), -1)
    if isinstance(detrend_type, str):
        def detrend_func(d):
            return detrend(d, axis=-1, type=detrend_type)
    elif callable(detrend_type):
        detrend_func = detrend_type
    elif not detrend_type:
        def detrend_func(d):
            return d
    else:
        raise ValueError(f"Unsupported detrend type: {detrend_type}")
    if scaling == "density":
        scale = 1.0 / (fs * (win * win).sum())
    elif scaling == "spectrum":
        scale = 1.0 / win.sum() ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling}")
    if mode == "stft":
        scale = jnp.sqrt(scale)
    scale = jnp.asarray(scale)
    scale = scale.astype(jnp.result_type(scale.dtype, np.complex64))
    two_sided = not return_onesided
    if return_onesided and (jnp.iscomplexobj(x) or (y is not None and jnp.iscomplexobj(y))):
        two_sided = True
        warnings.warn("Input data is complex, switching to return_onesided=False")
    freqs = (jnp.fft.fftfreq if two_sided else jnp.fft.rfftfreq)(nfft, 1 / fs, dtype=freq_dtype)
    result = _segments_transformed(x, win, detrend_func, nperseg, noverlap, nfft, two_sided)
    if y is not None:
        result = jnp.conjugate(result) * _segments_transformed(y, win, detrend_func, nperseg, noverlap, nfft,
                                                               two_sided)
    elif mode == "psd":
        result = jnp.conjugate(result) * result
    result = result * scale
    if not two_sided and mode == "psd":
        result = result.at[..., 1:None if nfft % 2 else -1].multiply(2)
    time = jnp.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, step, dtype=freq_dtype) / fs
    if boundary is not None:
        time = time - (nperseg / 2) / fs
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = result.real
    return freqs, time, jnp.moveaxis(result, -1, axis)


def stft(x, fs=1.0, window: str = "hann", nperseg: int = 256, noverlap=None, nfft=None, detrend=False,
         return_onesided: bool = True, boundary="zeros", padded: bool = True, axis: int = -1):
    """Short-time Fourier transform: (frequencies, segment times, spectra)."""
    return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, "spectrum", axis,
                     "stft", boundary, padded)


def _median_bias(n: int):
    jnp = _jnp()
    even = jnp.arange(2.0, n, 2)
    return 1 + jnp.sum(1.0 / (even + 1) - 1.0 / even)


def csd(x, y, fs=1.0, window: str = "hann", nperseg=None, noverlap=None, nfft=None, detrend="constant",
        return_onesided: bool = True, scaling: str = "density", axis: int = -1, average: str = "mean"):
    """Cross power spectral density of x and y by Welch's method: (frequencies, Pxy)."""
    jnp = _jnp()
    freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
                              axis, "psd")
    if y is not None:
        pxy = pxy + 0j
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                bias = _median_bias(pxy.shape[-1]).astype(pxy.dtype)
                if jnp.iscomplexobj(pxy):
                    pxy = jnp.median(jnp.real(pxy), axis=-1) + 1j * jnp.median(jnp.imag(pxy), axis=-1)
                else:
                    pxy = jnp.median(pxy, axis=-1)
                pxy = pxy / bias
            elif average == "mean":
                pxy = pxy.mean(axis=-1)
            else:
                raise ValueError(f'average must be "median" or "mean", got {average}')
        else:
            pxy = jnp.reshape(pxy, pxy.shape[:-1])
    return freqs, pxy


def welch(x, fs=1.0, window: str = "hann", nperseg=None, noverlap=None, nfft=None, detrend="constant",
          return_onesided: bool = True, scaling: str = "density", axis: int = -1, average: str = "mean"):
    """Power spectral density of x by Welch's method: (frequencies, Pxx)."""
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap, nfft=nfft,
                     detrend=detrend, return_onesided=return_onesided, scaling=scaling, axis=axis,
                     average=average)
    return freqs, pxx.real


def _overlap_add(frames, step: int):
    """Frames (..., n, length) placed `step` apart and summed where they overlap."""
    jnp = _jnp()
    *batch, count, length = frames.shape
    total = step * (count - 1) + length
    where = (np.arange(count)[:, None] * step + np.arange(length)[None, :]).reshape(-1)
    flat = frames.reshape(tuple(batch) + (count * length,))
    return jnp.zeros(tuple(batch) + (total,), frames.dtype).at[..., where].add(flat)


def istft(Zxx, fs=1.0, window: str = "hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided: bool = True, boundary: bool = True, time_axis: int = -1, freq_axis: int = -2):
    """Inverse short-time Fourier transform by overlap-add: (times, signal)."""
    from meshsim._src.lax.structural import canonicalize_axis
    jnp = _jnp()
    Zxx = jnp.asarray(Zxx)
    if Zxx.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    freq_axis = canonicalize_axis(freq_axis, Zxx.ndim)
    time_axis = canonicalize_axis(time_axis, Zxx.ndim)
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    Zxx = Zxx.astype(jnp.result_type(Zxx.dtype, np.complex64))
    n_default = 2 * (Zxx.shape[freq_axis] - 1) if input_onesided else Zxx.shape[freq_axis]
    nperseg_int = _concrete_int(nperseg or n_default, "nperseg")
    if nperseg_int < 1:
        raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft_int = n_default + (1 if input_onesided and nperseg_int == n_default + 1 else 0)
    else:
        nfft_int = _concrete_int(nfft, "nfft")
    if nfft_int < nperseg_int:
        raise ValueError(f"FFT length ({nfft_int}) must be longer than nperseg ({nperseg_int}).")
    noverlap_int = _concrete_int(noverlap or nperseg_int // 2, "noverlap")
    if noverlap_int >= nperseg_int:
        raise ValueError("noverlap must be less than nperseg.")
    step = nperseg_int - noverlap_int
    if time_axis != Zxx.ndim - 1 or freq_axis != Zxx.ndim - 2:
        outer = tuple(i for i in range(Zxx.ndim) if i not in (time_axis, freq_axis))
        Zxx = jnp.transpose(Zxx, outer + (freq_axis, time_axis))
    inverse = jnp.fft.irfft if input_onesided else jnp.fft.ifft
    # The inverse FFT's length is the `nfft` given (its own default when None), as in JAX.
    frames = inverse(Zxx, axis=-2, n=nfft)[..., :nperseg_int, :]
    if isinstance(window, (str, tuple)):
        win = _named_window(window, nperseg_int, frames.dtype)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1:
            raise ValueError("window must be 1-D")
        if win.shape[0] != nperseg_int:
            raise ValueError(f"window must have length of {nperseg_int}")
    frames = frames * win.sum()  # undoes the 'spectrum' scaling
    win = win.reshape((1,) * (frames.ndim - 2) + (nperseg_int, 1))
    x = _overlap_add((frames * win).swapaxes(-2, -1), step)
    norm = _overlap_add(jnp.repeat(win * win, frames.shape[-1], axis=-1).swapaxes(-2, -1), step)
    if boundary:
        x = x[..., nperseg_int // 2:-(nperseg_int // 2)]
        norm = norm[..., nperseg_int // 2:-(nperseg_int // 2)]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and time_axis != Zxx.ndim - 1:
        x = jnp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    time = jnp.arange(x.shape[0], dtype=np.finfo(x.dtype).dtype) / fs
    return time, x
