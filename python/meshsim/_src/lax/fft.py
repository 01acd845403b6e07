"""meshsim.lax.fft: the `fft` primitive (as jax.lax.fft) and its `FftType`."""
from __future__ import annotations

import enum
from typing import Sequence

import numpy as np

from meshsim._src import core, dtype_kinds

__all__ = ["FftType", "fft"]


class FftType(enum.IntEnum):
    """Which transform `fft` computes: complex forward/inverse, real-to-complex
    forward (RFFT) or complex-to-real inverse (IRFFT)."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


_BY_NAME = {"fft": FftType.FFT, "ifft": FftType.IFFT, "rfft": FftType.RFFT, "irfft": FftType.IRFFT}


def _fft_type(fft_type) -> FftType:
    if isinstance(fft_type, str):
        typ = _BY_NAME.get(fft_type.lower()) if fft_type in (fft_type.lower(), fft_type.upper()) else None
        if typ is None:
            raise ValueError(f"Unknown FFT type '{fft_type}'")
        return typ
    if isinstance(fft_type, FftType):
        return fft_type
    raise TypeError(f"Unknown FFT type value '{fft_type}'")


def _inexact(dtype: np.dtype) -> np.dtype:
    if dtype_kinds.issubdtype(dtype, np.inexact):
        return dtype
    return core.canonicalize_dtype(np.float64)


def _complex(dtype: np.dtype) -> np.dtype:
    dtype = _inexact(dtype)
    if dtype.kind == "c":
        return dtype
    return np.dtype(np.complex128) if dtype == np.float64 else np.dtype(np.complex64)


def fft(x, fft_type: FftType | str, fft_lengths: Sequence[int]):
    """The FFT of the trailing len(fft_lengths) dimensions of `x` (converted to
    complex, or for RFFT to a real floating type); IFFT and IRFFT scale by
    1/prod(fft_lengths)."""
    typ = _fft_type(fft_type)
    x = core.asarray_value(x)
    if typ == FftType.RFFT:
        if x.dtype.kind == "c":
            raise ValueError("only real valued inputs supported for rfft")
        x = core.convert_element_type(x, _inexact(x.dtype))
    else:
        x = core.convert_element_type(x, _complex(x.dtype))
    lengths = tuple(int(n) for n in fft_lengths)
    if not lengths:
        return x
    return core.bind1("fft", x, fft_lengths=lengths, fft_type=int(typ))

