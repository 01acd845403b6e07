"""`jax.extend.linear_util`: a function wrapped for JAX's internal tracing APIs."""
from __future__ import annotations


class WrappedFun:
    """`fun` with the description of where it came from (`debug_info`), called with
    `call_wrapped`. Wrappers (`api_util.flatten_fun`) compose by wrapping `fun`."""

    def __init__(self, fun, debug_info=None):
        self.f = fun
        self.debug_info = debug_info

    def call_wrapped(self, *args, **kwargs):
        return self.f(*args, **kwargs)

    def __repr__(self):
        return f"Wrapped function: {getattr(self.f, '__name__', self.f)!r}"


def wrap_init(fun, params=None, *, debug_info=None) -> WrappedFun:
    if params:
        return WrappedFun(lambda *args: fun(*args, **params), debug_info)
    return WrappedFun(fun, debug_info)
