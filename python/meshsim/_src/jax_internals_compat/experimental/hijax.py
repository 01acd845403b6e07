"""`jax.experimental.hijax`: user-defined high-level types and primitives that JAX lowers
to ordinary arrays. meshsim does not implement them. The names a library defines its
types and primitives with at import time exist (flax's hijax Variables, off unless
`flax_hijax_variable` is set); binding such a primitive or building its abstract values
raises NotImplementedError naming it."""
from __future__ import annotations

from meshsim._src.core_types import AbstractValue  # noqa: F401
from meshsim._src.jax_internals_compat import unsupported

_WHY = "meshsim has no high-level (hijax) types or primitives"


class _EffectTypes(set):
    def add_type(self, effect_type: type) -> None:
        self.add(effect_type)


# Effect types allowed inside control flow; meshsim's programs carry no effects.
control_flow_allowed_effects = _EffectTypes()

# High-level type -> the function giving its abstract value, as registered.
_hitypes: dict = {}


def register_hitype(cls: type, to_aval) -> None:
    _hitypes[cls] = to_aval


class HiPrimitive:
    """A high-level primitive: defining one works, binding it raises."""
    multiple_results = False

    def __init__(self, name: str):
        self.name = name

    def bind(self, *args, **params):
        raise unsupported(f"jax.experimental.hijax.HiPrimitive '{self.name}'", _WHY)

    def __repr__(self):
        return self.name


class MutableHiType:
    """The base of a library's mutable high-level abstract values."""


class aval_method:
    """A method of a high-level value that is also callable on its abstract value."""

    def __init__(self, fun):
        self.fun = fun

    def __get__(self, instance, owner=None):
        return self.fun if instance is None else self.fun.__get__(instance, owner)


class aval_property(property):
    """A property of a high-level value that is also readable on its abstract value."""


class Zero:
    """A symbolic zero tangent."""

    def __init__(self, aval):
        self.aval = aval


def instantiate_zeros(x):
    if isinstance(x, Zero):
        raise unsupported("jax.experimental.hijax.instantiate_zeros", _WHY)
    return x


def is_undefined_primal(x) -> bool:
    return False


class AvalQDD:
    def __init__(self, *args, **kwargs):
        raise unsupported("jax.experimental.hijax.AvalQDD", _WHY)


class AvalMutableQDD:
    def __init__(self, *args, **kwargs):
        raise unsupported("jax.experimental.hijax.AvalMutableQDD", _WHY)
