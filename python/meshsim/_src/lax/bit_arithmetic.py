"""jax.lax operations on the bits of numbers, composed of integer primitives as XLA expands
them: `mulhi` (the high half of the double-width product) and `reduce_precision` (rounding
to a float format with fewer exponent and mantissa bits)."""
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


# (exponent bits, mantissa bits, the unsigned type of the same width) of the formats computed
# in their own width; bfloat16 and float8 formats are rounded through float32 (as XLA's CPU
# backend computes them, so a NaN comes back quiet).
_FORMATS = {np.dtype(np.float32): (8, 23, np.uint32), np.dtype(np.float64): (11, 52, np.uint64),
            np.dtype(np.float16): (5, 10, np.uint16)}


def _format_of(dtype):
    return _FORMATS.get(dtype)


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """The floats rounded (to nearest, ties to even) to a format of `exponent_bits` and
    `mantissa_bits`: too large becomes ±inf, below its smallest normal ±0; NaN stays.
    Its derivative rounds the tangent the same way (as JAX's)."""
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
    return _reduce_precision(x, exponent_bits, mantissa_bits)


def _make_reduce_precision():
    from meshsim._src.ad import custom_vjp

    def rounded(x, exponent_bits, mantissa_bits):
        return _round_bits(x, exponent_bits, mantissa_bits)

    rule = custom_vjp(rounded, nondiff_argnums=(1, 2))
    # Rounding is linear as JAX treats it: the cotangent is rounded the same way.
    rule.defvjp(lambda x, e, m: (_round_bits(x, e, m), None),
                lambda e, m, _, g: (_round_bits(g, e, m),))
    rule._forward_mode = True  # JAX's reduce_precision has a JVP rule
    return rule


_reduce_precision_rule = None


def _reduce_precision(x, exponent_bits, mantissa_bits):
    global _reduce_precision_rule
    if _reduce_precision_rule is None:
        _reduce_precision_rule = _make_reduce_precision()
    return _reduce_precision_rule(x, exponent_bits, mantissa_bits)


def _round_bits(x, exponent_bits: int, mantissa_bits: int):
    lax = _lax()
    dtype = np.dtype(x.dtype)
    fmt = _format_of(dtype)
    if fmt is None:
        if exponent_bits >= 8 and mantissa_bits >= 23:
            return x  # float32 rounds nothing: the value, NaN payload included, is unchanged
        wide = _round_bits(lax.convert_element_type(x, np.float32), exponent_bits, mantissa_bits)
        # A NaN comes back as the quiet NaN of its sign.
        width = dtype.itemsize * 8
        negative = lax.ne(lax.shift_right_logical(lax.bitcast_convert_type(x, f"uint{width}"),
                                                  lax.full(x.shape, width - 1, f"uint{width}")),
                          lax.full(x.shape, 0, f"uint{width}"))
        nan = lax.full_like(x, np.nan)
        nan = lax.select(negative, lax.neg(nan), nan)
        return lax.select(lax.ne(x, x), nan, lax.convert_element_type(wide, dtype))
    src_exponent, src_mantissa, bits_type = fmt
    bits = lax.bitcast_convert_type(x, bits_type)
    k = lambda v: _const(bits, v)  # noqa: E731
    if mantissa_bits < src_mantissa:
        dropped = src_mantissa - mantissa_bits
        last_kept = lax.bitwise_and(lax.shift_right_logical(bits, k(dropped)), k(1))
        bias = lax.add(last_kept, k((1 << (dropped - 1)) - 1))
        bits = lax.bitwise_and(lax.add(bits, bias), k(~((1 << dropped) - 1) & ((1 << (8 * np.dtype(bits_type).itemsize)) - 1)))
    if exponent_bits < src_exponent:
        src_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
        sign_mask = 1 << (src_exponent + src_mantissa)
        exponent = lax.bitwise_and(bits, k(exponent_mask))
        overflow = lax.gt(exponent, k((src_bias + reduced_bias) << src_mantissa))
        underflow = lax.le(exponent, k((src_bias - reduced_bias) << src_mantissa))
        signed_zero = lax.bitwise_and(bits, k(sign_mask))
        signed_inf = lax.bitwise_or(signed_zero, k(exponent_mask))
        bits = lax.select(overflow, signed_inf, lax.select(underflow, signed_zero, bits))
    rounded = lax.bitcast_convert_type(bits, dtype)
    return lax.select(lax.ne(x, x), x, rounded)
