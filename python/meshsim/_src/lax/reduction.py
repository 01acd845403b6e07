"""meshsim.lax: reductions over axes, argmax/argmin and cumulative scans (as jax.lax).

One primitive each; the C++ rules check axes and dtypes with JAX's messages."""
from __future__ import annotations

import operator

from meshsim._src import core

__all__ = [
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or", "reduce_xor",
    "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
]


def _reduce(prim: str):
    def reduce(operand, axes):
        return core.bind1(prim, core.asarray_value(operand), axes=tuple(operator.index(a) for a in axes))
    reduce.__name__ = reduce.__qualname__ = prim
    return reduce


reduce_sum = _reduce("reduce_sum")
reduce_prod = _reduce("reduce_prod")
reduce_max = _reduce("reduce_max")
reduce_min = _reduce("reduce_min")
reduce_and = _reduce("reduce_and")
reduce_or = _reduce("reduce_or")
reduce_xor = _reduce("reduce_xor")


def _arg_reduce(prim: str):
    def arg_reduce(operand, axis: int, index_dtype):
        return core.bind1(prim, core.asarray_value(operand), axes=(operator.index(axis),),
                          index_dtype=core.canonicalize_dtype(index_dtype))
    arg_reduce.__name__ = arg_reduce.__qualname__ = prim
    return arg_reduce


argmax = _arg_reduce("argmax")
argmin = _arg_reduce("argmin")


def _cumulative(prim: str):
    def cumulative(operand, axis: int = 0, reverse: bool = False):
        return core.bind1(prim, core.asarray_value(operand), axis=operator.index(axis), reverse=bool(reverse))
    cumulative.__name__ = cumulative.__qualname__ = prim
    return cumulative


cumsum = _cumulative("cumsum")
cumprod = _cumulative("cumprod")
cummax = _cumulative("cummax")
cummin = _cumulative("cummin")


def cumlogsumexp(operand, axis: int = 0, reverse: bool = False):
    """log(cumsum(exp(operand))) along `axis`, shifted by the maximum along the
    axis so that exp cannot overflow."""
    from meshsim._src import ad
    from meshsim._src.lax import elementwise as lax
    from meshsim._src.lax import structural
    operand = core.asarray_value(operand)
    axis = structural.canonicalize_axis(axis, operand.ndim)
    shift = ad.stop_gradient(reduce_max(operand, (axis,)))
    shift = structural.broadcast_in_dim(shift, operand.shape,
                                        tuple(d for d in range(operand.ndim) if d != axis))
    return lax.add(lax.log(cumsum(lax.exp(lax.sub(operand, shift)), axis, reverse)), shift)
