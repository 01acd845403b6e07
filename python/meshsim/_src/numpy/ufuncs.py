"""Elementwise functions of meshsim.numpy (NumPy ufunc semantics, JAX dtypes)."""
from __future__ import annotations

from meshsim._src import core
from meshsim._src.numpy.promotion import promote_args, promote_args_inexact

__all__ = ["add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal", "less",
           "less_equal", "greater", "greater_equal", "sin", "cos", "exp", "log", "tanh", "sqrt",
           "negative"]


def _binary(prim):
    def fn(x, y, /):
        return core.bind1(prim, *promote_args(x, y))
    fn.__name__ = fn.__qualname__ = prim
    return fn


def _unary_inexact(prim):
    def fn(x, /):
        return core.bind1(prim, *promote_args_inexact(x))
    fn.__name__ = fn.__qualname__ = prim
    return fn


add = _binary("add")
subtract = _binary("sub")
multiply = _binary("mul")
maximum = _binary("max")
minimum = _binary("min")
equal = _binary("eq")
not_equal = _binary("ne")
less = _binary("lt")
less_equal = _binary("le")
greater = _binary("gt")
greater_equal = _binary("ge")

sin = _unary_inexact("sin")
cos = _unary_inexact("cos")
exp = _unary_inexact("exp")
log = _unary_inexact("log")
tanh = _unary_inexact("tanh")
sqrt = _unary_inexact("sqrt")


def negative(x, /):
    return core.bind1("neg", *promote_args(x))

