"""Primitives a library defines itself (`jax.extend.core.Primitive`), and the tables JAX keeps
their rules in (`jax.interpreters.ad`, `.batching`, `.mlir`).

meshsim has no way to add a primitive to its programs from Python, so a library's primitive
is applied by its definition in array operations: `bind` calls the function registered with
`mlir.register_lowering(p, mlir.lower_fun(f))` (the primitive as JAX operations) or else the
`def_impl` implementation, on concrete values and tracers alike. jit, grad and vmap then see
those operations, so values are the implementation's; rules a library registers for
differentiation or batching are kept in the tables but not consulted: a primitive whose rule
deliberately differs from its implementation (a batching rule that ignores the batch, a JVP
that raises) behaves as its implementation here."""
from __future__ import annotations

from typing import Any, Callable

from meshsim._src.jax_internals_compat import unsupported

# The tables libraries register rules in, by primitive (kept, not consulted: see above).
primitive_jvps: dict = {}
primitive_transposes: dict = {}
primitive_batchers: dict = {}
axis_primitive_batchers: dict = {}
lowerings: dict = {}


class LoweredFun:
    """`mlir.lower_fun(f)`: the primitive written as array operations."""

    def __init__(self, fun: Callable, multiple_results: bool):
        self.fun, self.multiple_results = fun, multiple_results

    def __call__(self, *args, **kwargs):
        raise unsupported("a lowering rule", "meshsim applies a lower_fun's function directly")


class Primitive:
    """A library's primitive: its name, implementation and abstract evaluation."""

    multiple_results = False

    def __init__(self, name: str):
        self.name = name
        self.impl: Callable | None = None
        self.abstract_eval: Callable | None = None

    def __repr__(self):
        return self.name

    def def_impl(self, impl: Callable) -> Callable:
        self.impl = impl
        return impl

    def def_abstract_eval(self, abstract_eval: Callable) -> Callable:
        self.abstract_eval = abstract_eval
        return abstract_eval

    def def_effectful_abstract_eval(self, effectful_abstract_eval: Callable) -> Callable:
        self.abstract_eval = effectful_abstract_eval
        return effectful_abstract_eval

    def get_bind_params(self, params: dict) -> dict:
        """The params to bind an equation's primitive with (JAX's interpreters call it): the
        equation's own, as meshsim's equations hold programs rather than functions."""
        return dict(params)

    def bind(self, *args, **params) -> Any:
        lowered = lowerings.get(self)
        fun = lowered.fun if isinstance(lowered, LoweredFun) else self.impl
        if fun is None:
            raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented")
        return fun(*args, **params)


def applying(name: str, fun: Callable, multiple_results: bool = False) -> Primitive:
    """A Primitive standing for one of meshsim's operations, applied by `fun` (the objects
    `jax.lax.stop_gradient_p` and the like, which libraries key their own tables by)."""
    p = Primitive(name)
    p.multiple_results = multiple_results
    p.def_impl(fun)
    return p
