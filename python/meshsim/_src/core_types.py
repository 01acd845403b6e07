"""The names `jax.core` keeps public: the classes of traced values (`Tracer`),
of traces (`Trace`), and of abstract values (`ShapedArray`, an
`AbstractValue`), with `max_dim`/`min_dim` on dimension sizes."""
from __future__ import annotations

import abc

from meshsim import _core

Tracer = _core.Tracer
Trace = _core.Trace
ShapedArray = _core.ShapedArray


class AbstractValue(abc.ABC):
    """The type of every abstract value (`ShapedArray` here)."""
    __slots__ = ()


AbstractValue.register(ShapedArray)


def max_dim(d1: int, d2: int) -> int:
    """The larger of two dimension sizes."""
    return max(int(d1), int(d2))


def min_dim(d1: int, d2: int) -> int:
    """The smaller of two dimension sizes."""
    return min(int(d1), int(d2))
