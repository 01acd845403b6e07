"""Dtype utilities (`jax.dtypes`)."""
from meshsim._src.ad import float0  # noqa: F401
from meshsim._src.core import canonicalize_dtype  # noqa: F401
from meshsim._src.numpy.dtypes import (TypePromotionError, finfo, iinfo, issubdtype,  # noqa: F401
                                      result_type)


def scalar_type_of(x) -> type:
    """The Python scalar type (bool, int or float) of `x`'s dtype."""
    import numpy as np
    kind = np.dtype(getattr(x, "dtype", np.asarray(x).dtype)).kind
    return {"b": bool, "i": int, "u": int, "f": float}[kind]


def itemsize_bits(dtype) -> int:
    """The number of bits one element of `dtype` occupies."""
    from meshsim._src.numpy.dtypes import _dtype_of
    return _dtype_of(dtype).itemsize * 8
