"""`jax.extend.core`: effects and the opaque identity of the current trace."""
from __future__ import annotations

import weakref

from meshsim import _core


class Effect:
    """The base class of side effects a traced program may have. A library subclasses it
    to name its effects; meshsim's programs carry no effect sets, so nothing checks them."""


class OpaqueTraceState:
    """Which trace (or none: eager evaluation) was innermost when it was taken. Two states are
    equal when they name the same trace; a library keeps one with a mutable object and compares
    it later to refuse mutating the object from inside a different trace (flax's Variables)."""
    __slots__ = ("_trace",)

    def __init__(self, trace):
        self._trace = None if trace is None else weakref.ref(trace)

    def _current(self):
        return None if self._trace is None else self._trace()

    def __eq__(self, other):
        if not isinstance(other, OpaqueTraceState):
            return NotImplemented
        if self._trace is None or other._trace is None:
            return self._trace is other._trace
        return self._trace == other._trace

    def __hash__(self):
        return hash(self._trace)

    def __repr__(self):
        return f"OpaqueTraceState({'eager' if self._trace is None else self._current()})"


def get_opaque_trace_state(convention=None) -> OpaqueTraceState:
    """The identity of the innermost open trace (jit, grad, vmap, control flow, ...)."""
    del convention  # JAX asks callers to name themselves; the answer does not depend on it
    return OpaqueTraceState(_core.current_trace())


from meshsim._src.jaxpr import (  # noqa: E402,F401
    ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var, jaxpr_as_fun)
from meshsim._src.jax_internals_compat.user_primitives import Primitive  # noqa: E402,F401


def find_top_trace(xs):
    """The innermost trace any of `xs` belongs to (None: all concrete)."""
    return _core.current_trace() if any(isinstance(x, _core.Tracer) for x in xs) else None


def mapped_aval(size, axis, aval):
    """`aval` with the mapped `axis` (of `size`) removed; unchanged when `axis` is None."""
    if axis is None:
        return aval
    shape = list(aval.shape)
    del shape[axis]
    return _core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)


def unmapped_aval(size, axis, aval, explicit_mesh_axis=None):
    """`aval` with an axis of `size` inserted at `axis`; unchanged when `axis` is None."""
    if axis is None:
        return aval
    shape = list(aval.shape)
    shape.insert(axis, size)
    return _core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)
