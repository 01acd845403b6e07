"""`jax.interpreters.mlir`: registering a library primitive's lowering. A lowering written
with `lower_fun` is how meshsim applies the primitive (see user_primitives); meshsim emits no
MLIR, so other lowering rules are kept and never run."""
from __future__ import annotations

from meshsim._src.jax_internals_compat import unsupported
from meshsim._src.jax_internals_compat.user_primitives import LoweredFun, lowerings


def lower_fun(fun, multiple_results: bool = True) -> LoweredFun:
    return LoweredFun(fun, multiple_results)


def register_lowering(prim, rule, platform: str | None = None, **kwargs):
    if platform in (None, "cpu") or prim not in lowerings:
        lowerings[prim] = rule
    return rule


def emit_python_callback(*args, **kwargs):
    raise unsupported("jax.interpreters.mlir.emit_python_callback", "meshsim emits no MLIR")
