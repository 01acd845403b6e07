"""Dtype utilities (`jax.dtypes`)."""
import ml_dtypes as _ml_dtypes

from meshsim._src.float0 import float0  # noqa: F401
from meshsim._src.core import canonicalize_dtype  # noqa: F401
from meshsim._src.numpy.dtypes import (  # noqa: F401
    TypePromotionError, extended, finfo, iinfo, issubdtype, prng_key, result_type)

# The scalar types of the narrow floats, as jax.dtypes exports them (ml_dtypes' classes).
bfloat16 = _ml_dtypes.bfloat16
float8_e4m3fn = _ml_dtypes.float8_e4m3fn
float8_e5m2 = _ml_dtypes.float8_e5m2
float8_e4m3 = _ml_dtypes.float8_e4m3
float8_e3m4 = _ml_dtypes.float8_e3m4
float8_e4m3fnuz = _ml_dtypes.float8_e4m3fnuz
float8_e5m2fnuz = _ml_dtypes.float8_e5m2fnuz
float8_e4m3b11fnuz = _ml_dtypes.float8_e4m3b11fnuz
int4 = _ml_dtypes.int4
uint4 = _ml_dtypes.uint4


def scalar_type_of(x) -> type:
    """The Python scalar type (bool, int or float) of `x`'s dtype."""
    import numpy as np
    dtype = np.dtype(getattr(x, "dtype", np.asarray(x).dtype))
    if issubdtype(dtype, np.floating):
        return float
    if issubdtype(dtype, np.complexfloating):
        return complex
    if issubdtype(dtype, np.integer):
        return int
    return {"b": bool, "i": int, "u": int}[dtype.kind]


def itemsize_bits(dtype) -> int:
    """The number of bits one element of `dtype` occupies."""
    from meshsim._src.numpy.dtypes import _dtype_of
    return _dtype_of(dtype).itemsize * 8
