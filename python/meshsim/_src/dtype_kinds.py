"""Dtype classification that knows the narrow floats and four-bit integers.

NumPy does not count ml_dtypes' types (bfloat16, float8_*, int4, uint4) as
np.floating / np.integer, and np.finfo refuses them; JAX's dtype queries do
both. meshsim asks here instead of NumPy wherever a dtype's kind matters."""
from __future__ import annotations

import ml_dtypes
import numpy as np

# The floating-point types NumPy does not classify, by name (as ml_dtypes spells them).
NARROW_FLOAT_NAMES = (
    "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e3m4",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
)
NARROW_FLOAT_TYPES = tuple(getattr(ml_dtypes, n) for n in NARROW_FLOAT_NAMES)
_NARROW_FLOAT_DTYPES = frozenset(np.dtype(t) for t in NARROW_FLOAT_TYPES)
# Abstract classes a narrow float belongs to.
_FLOAT_PARENTS = (np.floating, np.inexact, np.number, np.generic)
INT4_TYPES = (ml_dtypes.int4, ml_dtypes.uint4)
_INT4_PARENTS = {
    ml_dtypes.int4: (np.signedinteger, np.integer, np.number, np.generic),
    ml_dtypes.uint4: (np.unsignedinteger, np.integer, np.number, np.generic),
}


def _as_type(x):
    """A NumPy scalar class (abstract classes stay as they are) or None."""
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt.type
    try:
        return np.dtype(x).type
    except TypeError:
        return None


def issubdtype(arg1, arg2) -> bool:
    """np.issubdtype, with ml_dtypes' floats counted as np.floating (as jnp.issubdtype)."""
    t1, t2 = _as_type(arg1), _as_type(arg2)
    if t1 in NARROW_FLOAT_TYPES:
        return t1 is t2 or t2 in _FLOAT_PARENTS
    if t1 in INT4_TYPES:
        return t1 is t2 or t2 in _INT4_PARENTS[t1]
    if t2 in NARROW_FLOAT_TYPES or t2 in INT4_TYPES:
        return t1 is t2
    return np.issubdtype(t1 if t1 is not None else arg1, t2 if t2 is not None else arg2)


def is_narrow_float(dtype) -> bool:
    return np.dtype(dtype) in _NARROW_FLOAT_DTYPES


def finfo(dtype):
    """Machine limits of a floating dtype, narrow ones included (ml_dtypes.finfo)."""
    return ml_dtypes.finfo(np.dtype(dtype))


def iinfo(dtype):
    return ml_dtypes.iinfo(np.dtype(dtype))
