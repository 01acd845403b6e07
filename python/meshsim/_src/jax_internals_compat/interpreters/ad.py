"""`jax.interpreters.ad`: the rule tables and markers a library uses to define how its own
primitives differentiate (see user_primitives for how meshsim applies such primitives)."""
from __future__ import annotations

from meshsim._src.jax_internals_compat.user_primitives import (  # noqa: F401
    primitive_jvps, primitive_transposes)


class Zero:
    """A symbolic zero tangent of type `aval`."""

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval})"

    @staticmethod
    def from_primal_value(value):
        from meshsim._src import core
        return Zero(core.typeof(value))


class UndefinedPrimal:
    """A linear input of a transpose rule: known by its type only."""

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval})"


def is_undefined_primal(x) -> bool:
    return type(x) is UndefinedPrimal


def instantiate_zeros(tangent):
    """A symbolic zero made an array of zeros; any other tangent as it is."""
    if type(tangent) is Zero:
        from meshsim._src.numpy.creation import zeros
        return zeros(tangent.aval.shape, tangent.aval.dtype)
    return tangent


class JVPTracer:
    """Never instantiated: meshsim's differentiation does not trace with JAX's tracer classes,
    so an `isinstance(x, JVPTracer)` test is always false."""
