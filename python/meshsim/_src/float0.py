"""float0, the tangent type of integer and boolean values (jax.dtypes.float0), and the host
arrays that hold its zeros.

A float0 value carries only a shape: JAX hands it out as a `TypedNdArray` (an np.ndarray
that keeps the JAX type it was made with) and a jitted function returning one gives it back
without computing anything. `Float0Zeros` is that output's place in a jitted function's
output tree: a pytree node with no leaves that rebuilds the zeros when results are unflattened."""
from __future__ import annotations

import numpy as np

float0 = np.dtype([("float0", np.void, 0)])


class TypedNdArray(np.ndarray):
    """A host array of a JAX type, as JAX returns float0 zeros (printed as JAX prints it)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(np.asarray(x) if isinstance(x, TypedNdArray) else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(x) if isinstance(x, TypedNdArray) else x
                                  for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __repr__(self):
        prefix, suffix = "TypedNdArray(", f"dtype={self.dtype.name})"
        if self.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(np.asarray(self), prefix=prefix, suffix=",", separator=", ",
                                   max_line_width=np.get_printoptions()["linewidth"])
        width = np.get_printoptions()["linewidth"]
        last_line = len(body) - body.rfind("\n") + 1
        gap = " " * len(prefix) if last_line + len(suffix) + 1 > width else " "
        return f"{prefix}{body},{gap}{suffix}"

    def __reduce__(self):
        return (_rebuild, (np.asarray(self),))


def _rebuild(value: np.ndarray) -> TypedNdArray:
    return np.asarray(value).view(TypedNdArray)


def float0_zeros(shape) -> TypedNdArray:
    """The float0 tangent of a value of this shape."""
    return np.zeros(tuple(shape), float0).view(TypedNdArray)


def is_float0(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == float0


class Float0Zeros:
    """A float0 output of a traced function: no value in the program, zeros again on output."""
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)
