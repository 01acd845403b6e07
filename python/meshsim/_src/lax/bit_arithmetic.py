"""jax.lax operations on the bits of numbers: `mulhi` (the high half of the double-width
product), composed of integer primitives as XLA expands it, and `reduce_precision` (rounding
to a float format with fewer exponent and mantissa bits), a primitive."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src import core
from meshsim._src import dtype_kinds

__all__ = ["mulhi", "reduce_precision"]


def _lax():
    from meshsim._src.lax import namespace as lax
    return lax


def _const(like, value):
    return _lax().full_like(like, value)


def _unsigned_mulhi(a, b):
    """High half of a * b for unsigned a, b: the product of the half-words, carried."""
    lax = _lax()
    half = np.dtype(a.dtype).itemsize * 4
    mask = _const(a, (1 << half) - 1)
    shift = _const(a, half)
    a_lo, a_hi = lax.bitwise_and(a, mask), lax.shift_right_logical(a, shift)
    b_lo, b_hi = lax.bitwise_and(b, mask), lax.shift_right_logical(b, shift)
    lo_lo, lo_hi = lax.mul(a_lo, b_lo), lax.mul(a_lo, b_hi)
    hi_lo, hi_hi = lax.mul(a_hi, b_lo), lax.mul(a_hi, b_hi)
    cross = lax.add(lax.add(lax.shift_right_logical(lo_lo, shift), lax.bitwise_and(lo_hi, mask)),
                    lax.bitwise_and(hi_lo, mask))
    high = lax.add(lax.shift_right_logical(lo_hi, shift), lax.shift_right_logical(hi_lo, shift))
    return lax.add(lax.add(hi_hi, high), lax.shift_right_logical(cross, shift))


def mulhi(x, y, /):
    """The high half of the double-width product of the integers x and y (signed or unsigned)."""
    lax = _lax()
    x, y = core.asarray_value(x), core.asarray_value(y)
    for position, v in enumerate((x, y)):
        if not dtype_kinds.issubdtype(v.dtype, np.integer):
            raise TypeError(f"mulhi does not accept dtype {np.dtype(v.dtype).name} at position {position}. "
                            f"Accepted dtypes at position {position} are subtypes of integer.")
    if x.dtype != y.dtype:
        raise TypeError("mulhi requires arguments to have the same dtypes, got "
                        f"{np.dtype(x.dtype).name}, {np.dtype(y.dtype).name}.")
    if x.shape != y.shape:
        raise TypeError(f"mulhi requires arguments to have the same shapes, got {x.shape}, {y.shape}.")
    dtype = np.dtype(x.dtype)
    if dtype.kind == "u":
        return _unsigned_mulhi(x, y)
    unsigned = np.dtype(f"uint{dtype.itemsize * 8}")
    ux, uy = lax.bitcast_convert_type(x, unsigned), lax.bitcast_convert_type(y, unsigned)
    high = _unsigned_mulhi(ux, uy)
    # Signed high half = unsigned high half - (x < 0 ? y : 0) - (y < 0 ? x : 0), modulo 2^bits.
    zero = _const(ux, 0)
    high = lax.sub(high, lax.select(lax.lt(x, _const(x, 0)), uy, zero))
    high = lax.sub(high, lax.select(lax.lt(y, _const(y, 0)), ux, zero))
    return lax.bitcast_convert_type(high, dtype)


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """The floats rounded (to nearest, ties to even) to a format of `exponent_bits` and
    `mantissa_bits`: too large becomes ±inf, below its smallest normal ±0; NaN stays.
    Linear as JAX differentiates it: tangents and cotangents are rounded the same way."""
    exponent_bits, mantissa_bits = operator.index(exponent_bits), operator.index(mantissa_bits)
    x = core.asarray_value(operand)
    dtype = np.dtype(x.dtype)
    if not dtype_kinds.issubdtype(dtype, np.floating):
        raise TypeError(f"reduce_precision does not accept dtype {dtype.name}. Accepted dtypes are subtypes "
                        "of floating.")
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got {exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; got {mantissa_bits}")
    return core.bind1("reduce_precision", x, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)
