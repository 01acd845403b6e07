"""meshsim.numpy: scalar types, dtype queries and constants (as jax.numpy).

`jnp.float32` and friends are not NumPy's scalar classes: calling one makes a
0-d (or n-d) meshsim Array of that dtype, as in JAX. They still work wherever
a dtype is expected and compare equal to the NumPy type and dtype."""
from __future__ import annotations

import builtins

import numpy as np
from numpy import (complexfloating, dtype, e, floating, generic, inexact, inf, integer, nan, newaxis,
                   number, pi, signedinteger, unsignedinteger)

from meshsim._src import dtype_kinds
from meshsim import _core
from meshsim._src import core
from meshsim._src.numpy import promotion

__all__ = [
    "bool_", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "single", "double", "int_", "uint", "float_",
    "bfloat16", "float16", "half", "float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e3m4",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
    "complex64", "complex128", "csingle", "cdouble", "complex_", "int4", "uint4",
    "dtype", "result_type", "promote_types", "can_cast", "issubdtype", "isdtype", "iinfo", "finfo",
    "generic", "number", "integer", "signedinteger", "unsignedinteger", "inexact", "floating",
    "complexfloating",
    "pi", "e", "inf", "nan", "newaxis",
]


# A promotion between dtypes that is not allowed (jax.dtypes.TypePromotionError, a ValueError).
TypePromotionError = _core.TypePromotionError
TypePromotionError.__module__ = "meshsim.dtypes"


class _ScalarMeta(type):
    """The metaclass of meshsim's scalar types: each class stands for one dtype."""
    dtype: np.dtype

    @property
    def __numpy_dtype__(cls) -> np.dtype:  # NumPy >= 2.4's protocol for np.dtype(cls)
        return cls.dtype

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __eq__(cls, other) -> bool:
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other) -> bool:
        return not cls == other

    def __call__(cls, x):
        from meshsim._src.numpy.creation import asarray
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, cls.dtype.type)


def _scalar_type(np_type) -> _ScalarMeta:
    name = np_type.__name__
    return _ScalarMeta(name, (object,), {
        "dtype": np.dtype(np_type), "__module__": "meshsim.numpy",
        "__doc__": f"A meshsim scalar constructor of type {name}: returns an Array."})


bool_ = bool = _scalar_type(np.bool_)  # noqa: A001 (jax.numpy.bool)
int8, int16, int32, int64 = map(_scalar_type, (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = map(_scalar_type, (np.uint8, np.uint16, np.uint32, np.uint64))
float32 = single = _scalar_type(np.float32)
float64 = double = _scalar_type(np.float64)
int_, uint, float_ = int64, uint64, float64
float16 = half = _scalar_type(np.float16)
bfloat16, float8_e4m3fn, float8_e5m2, float8_e4m3, float8_e3m4, float8_e4m3fnuz, float8_e5m2fnuz, \
    float8_e4m3b11fnuz = map(_scalar_type, dtype_kinds.NARROW_FLOAT_TYPES)
complex64 = csingle = _scalar_type(np.complex64)
complex128 = cdouble = complex_ = _scalar_type(np.complex128)
int4, uint4 = map(_scalar_type, dtype_kinds.INT4_TYPES)


def _dtype_of(x) -> np.dtype:
    """The dtype named by a dtype-like or carried by an array-like."""
    if isinstance(x, _ScalarMeta):
        return x.dtype
    # A name given as NumPy's str (np.str_) names a dtype: its own `.dtype` is a string type.
    if not isinstance(x, (type, str)) and hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return np.dtype(x)


# JAX treats the Python types int, float and complex as weak: they never widen a typed operand.
_WEAK_PYTHON_TYPES = {int: 0, float: 0.0, complex: 0j}


def result_type(*args) -> np.dtype:
    """The dtype JAX's promotion gives `args` (arrays, scalars or dtypes), canonicalised."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    args = [_WEAK_PYTHON_TYPES.get(a, a) if isinstance(a, type) else a for a in args]
    args = [a.dtype if isinstance(a, _ScalarMeta) else a for a in args]
    return promotion.result_type(*args)[0]


def promote_types(a, b) -> np.dtype:
    """JAX's binary promotion of two dtypes (Python int/float count as weak)."""
    # by identity: np.dtype('float64') == float
    a_weak, b_weak = (any(t is w for w in _WEAK_PYTHON_TYPES) for t in (a, b))
    a = core.python_scalar_dtype(_WEAK_PYTHON_TYPES[a]) if a_weak else _dtype_of(a)
    b = core.python_scalar_dtype(_WEAK_PYTHON_TYPES[b]) if b_weak else _dtype_of(b)
    return np.dtype(_core.promote_types(a, a_weak, b, b_weak)[0])


def can_cast(from_, to, casting="safe") -> builtins.bool:
    return np.can_cast(_dtype_of(from_), _dtype_of(to), casting)


def _generic_type(x):
    """issubdtype's view of `x`: abstract NumPy classes stay classes."""
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    return _dtype_of(x).type


class extended(np.generic):  # noqa: N801  (JAX's name)
    """The abstract type of dtypes NumPy does not have (`jax.dtypes.extended`): key types."""


class prng_key(extended):  # noqa: N801  (JAX's name)
    """The abstract type of PRNG key dtypes (`jax.dtypes.prng_key`): `key<fry>`."""


def _is_key_dtype(x) -> builtins.bool:
    from meshsim._src.prng import KeyTy
    return isinstance(x, KeyTy) or isinstance(getattr(x, "dtype", None), KeyTy)


def issubdtype(arg1, arg2) -> builtins.bool:
    if _is_key_dtype(arg1) or _is_key_dtype(arg2):
        # A key dtype is a prng_key, an extended dtype, and itself; nothing else is.
        if _is_key_dtype(arg1):
            return _is_key_dtype(arg2) or arg2 in (prng_key, extended)
        return False
    if isinstance(arg1, type) and issubclass(arg1, extended):
        return isinstance(arg2, type) and issubclass(arg1, arg2)
    return dtype_kinds.issubdtype(_generic_type(arg1), _generic_type(arg2))


_DTYPE_KINDS = {
    "bool": (np.bool_,), "signed integer": (np.signedinteger,),
    "unsigned integer": (np.unsignedinteger,), "integral": (np.integer,),
    "real floating": (np.floating,), "complex floating": (np.complexfloating,),
    "numeric": (np.integer, np.floating, np.complexfloating),
}


def isdtype(dtype, kind) -> builtins.bool:
    """Array-API dtype classification: `kind` is a dtype, a kind name or a tuple of them."""
    d = _dtype_of(dtype)
    for k in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(k, str):
            if k not in _DTYPE_KINDS:
                raise ValueError(f"Unrecognized data type kind: {k!r}.")
            if any(dtype_kinds.issubdtype(d, t) for t in _DTYPE_KINDS[k]):
                return True
        elif d == _dtype_of(k):
            return True
    return False


def iinfo(int_type):
    return dtype_kinds.iinfo(_dtype_of(int_type))


def finfo(dtype):
    return dtype_kinds.finfo(_dtype_of(dtype))


