"""`jax.interpreters.partial_eval`: evaluating a function on partly known inputs."""
from __future__ import annotations

from meshsim._src.jax_internals_compat import unsupported


class PartialVal(tuple):
    """`(aval, None)` for a value known only by its type, `(None, value)` for a known one."""

    def __new__(cls, xs):
        return tuple.__new__(cls, xs)

    @classmethod
    def known(cls, value):
        return cls((None, value))

    @classmethod
    def unknown(cls, aval):
        return cls((aval, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self):
        return self[1] if self[0] is None else None

    def get_aval(self):
        from meshsim._src import core
        return core.typeof(self[1]) if self[0] is None else self[0]


def trace_to_jaxpr_nounits(fun, pvals, instantiate=False):
    raise unsupported("jax.interpreters.partial_eval.trace_to_jaxpr_nounits", "not yet")
