"""`jax._src.dtypes`: meshsim's `jax.dtypes` plus the internal names a library defines its
own dtypes with (flax's fp8 meta dtype). meshsim's arrays hold NumPy dtypes only: an
extended dtype can be defined and compared, not stored in an array."""
from __future__ import annotations

import numpy as np

from meshsim._src.core import canonicalize_dtype  # noqa: F401
from meshsim._src.numpy.dtypes import (  # noqa: F401
    TypePromotionError, extended, finfo, iinfo, issubdtype, prng_key, result_type)

DType = np.dtype


class ExtendedDType:
    """The base of a dtype defined outside NumPy: subclasses give `type` (a subclass of
    `extended`), `name` and `_rules`."""
    type: type
    _rules: type

    @property
    def name(self) -> str:
        raise NotImplementedError


def supports_inf(dtype) -> bool:
    """Whether the floating dtype has infinities (several float8 formats have none)."""
    dtype = np.dtype(dtype)
    if not issubdtype(dtype, np.floating):
        return False
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(np.isinf(np.array(np.inf).astype(dtype)))

