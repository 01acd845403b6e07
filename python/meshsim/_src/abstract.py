"""Working with types alone: `ShapeDtypeStruct` (a shape, a dtype and an
optional sharding standing in for an array) and `eval_shape` (a function's
output types, found by tracing it without running anything)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from meshsim._src import core, tree_util


class ShapeDtypeStruct:
    """A stand-in for an array of `shape` and `dtype` (and `sharding`): accepted
    wherever a function is traced (`eval_shape`, `make_jaxpr`, `jit(...).lower`)."""

    __slots__ = ("shape", "dtype", "sharding", "weak_type", "vma")

    def __init__(self, shape, dtype, *, sharding=None, weak_type: bool = False, vma=None):
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        self.shape = tuple(shape)
        self.dtype = core.canonicalize_dtype(dtype)
        self.sharding = sharding
        self.weak_type = bool(weak_type)
        self.vma = vma

    @classmethod
    def like(cls, x) -> "ShapeDtypeStruct":
        """The stand-in for `x`'s type: its shape, dtype and weak type, and the sharding of a
        committed array (of a traced value, the one its type names over a mesh)."""
        aval = core.typeof(x)
        sharding = None
        if isinstance(x, core.Tracer):
            typed = core.typeof(x).sharding
            sharding = None if typed.mesh.empty else typed
        elif getattr(x, "committed", False):
            sharding = x.sharding
        return cls(aval.shape, aval.dtype, sharding=sharding, weak_type=aval.weak_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def aval(self) -> core.ShapedArray:
        core_sharding = getattr(self.sharding, "core_sharding", None)
        return core.ShapedArray(self.shape, self.dtype, self.weak_type, core_sharding)

    def __repr__(self) -> str:
        sharding = f", sharding={self.sharding}" if self.sharding is not None else ""
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{sharding}{weak})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, ShapeDtypeStruct) and
                (self.shape, self.dtype, self.sharding, self.weak_type) ==
                (other.shape, other.dtype, other.sharding, other.weak_type))

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.sharding, self.weak_type))


def _struct_of(aval) -> ShapeDtypeStruct:
    sharding = aval.sharding if aval.mesh is not None else None
    return ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sharding, weak_type=aval.weak_type)


def eval_shape(fun: Callable, *args, **kwargs) -> Any:
    """The pytree of `ShapeDtypeStruct`s `fun(*args, **kwargs)` would return;
    arguments may be arrays, array-likes or `ShapeDtypeStruct`s. Nothing runs."""
    from meshsim._src.api import trace_to_program
    program, out_tree = trace_to_program(fun, args, kwargs, captures_ok=True)
    return tree_util.tree_unflatten(out_tree, [_result_struct(a) for a in program.out_avals])


def _result_struct(aval) -> ShapeDtypeStruct:
    """A result's struct as JAX's eval_shape gives it: its sharding is part of its type only
    over a mesh whose axes are all Explicit or Manual; over Auto axes, where the compiler
    would choose it, the struct has none."""
    struct = _struct_of(aval)
    if struct.sharding is not None and not struct.sharding.mesh._are_all_axes_explicit_or_manual:
        struct = ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)
    return struct
