"""`custom_gradient`: a function that returns its value together with the
function that maps the output cotangent to the inputs' cotangents.

Built on `custom_vjp`. The rule may close over the forward pass's
intermediates; the backward pass runs `fun` again on the saved arguments to
rebuild that closure (the same values, recomputed rather than stored)."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import numpy as np

from meshsim._src import core, tree_util
from meshsim._src.ad import custom_vjp


def custom_gradient(fun: Callable) -> Callable:
    @custom_vjp
    def wrapped(*args):
        ans, _ = fun(*args)
        return ans

    def fwd(*args):
        ans, _ = fun(*args)
        return ans, args

    def bwd(args, ct):
        _, rule = fun(*args)
        cts = rule(ct)
        # A rule may return one array bare rather than a tuple of one.
        if tree_util.treedef_is_leaf(tree_util.tree_structure(cts)):
            cts = (cts,)
        return tuple(cts)

    wrapped.defvjp(fwd, bwd)
    return functools.wraps(fun)(lambda *args: wrapped(*args))


def closure_convert(fun: Callable, *example_args):
    """`fun` as a function of its arguments and the traced values it closes over: returns
    (converted, hoisted) with converted(*args, *hoisted) == fun(*args), so the closed-over
    tracers can be passed explicitly (for instance to a custom_vjp)."""
    from meshsim import _core
    from meshsim._src import core
    from meshsim._src.tracing import trace_flat
    leaves, in_tree = tree_util.tree_flatten(example_args)
    avals = [core.asarray_value(x).aval for x in leaves]
    program, hoisted, out_tree = trace_flat(fun, in_tree, avals)
    n_args = len(leaves)

    def converted(*args_and_hoisted):
        args, consts = args_and_hoisted[:len(example_args)], args_and_hoisted[len(example_args):]
        arg_leaves = [core.asarray_value(x) for x in tree_util.tree_leaves(args)]
        if len(arg_leaves) != n_args:
            raise TypeError(f"closure_convert: expected {n_args} argument leaves, got {len(arg_leaves)}")
        outs = _core.eval_program(program, [*arg_leaves, *[core.asarray_value(c) for c in consts]])
        return tree_util.tree_unflatten(out_tree, list(outs))

    return converted, list(hoisted)


class SymbolicZero:
    """A zero tangent or cotangent known by its type alone (custom rules defined with
    `symbolic_zeros=True` may receive and return them); attributes are its type's."""

    def __init__(self, aval) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return "SymbolicZero"

    def __getattr__(self, name):
        if name == "aval":  # not set yet (while unpickling or copying)
            raise AttributeError(name)
        return getattr(self.aval, name)

    @staticmethod
    def from_primal_value(val) -> "SymbolicZero":
        return SymbolicZero(core.typeof(val))


@dataclasses.dataclass
class CustomVJPPrimal:
    """An argument of a custom_vjp's forward rule defined with `symbolic_zeros=True`:
    its value and whether it is differentiated."""
    value: Any
    perturbed: bool


def custom_vjp_primal_tree_values(tree):
    """`tree` with each CustomVJPPrimal leaf replaced by its value."""
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return tree_util.tree_map(value, tree, is_leaf=lambda x: type(x) is CustomVJPPrimal)


def zero_from_primal(val, symbolic_zeros: bool = False):
    """The zero tangent of each leaf of `val` (float0 zeros for integer and boolean leaves;
    SymbolicZeros with `symbolic_zeros`)."""
    from meshsim._src.float0 import float0_zeros
    from meshsim._src.numpy import namespace as jnp
    if symbolic_zeros:
        return tree_util.tree_map(SymbolicZero.from_primal_value, val)

    def zero(x):
        x = jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.inexact):
            return jnp.zeros_like(x)
        return float0_zeros(x.shape)
    return tree_util.tree_map(zero, val)


def linear_call(fun: Callable, fun_transpose: Callable, residual_args, linear_args):
    """fun(residual_args, linear_args), a function linear in `linear_args`, whose transpose (its
    reverse-mode derivative) is fun_transpose(residual_args, cotangent); its forward-mode
    derivative applies `fun` to the tangent."""
    return bind_linear_call(fun, fun_transpose, residual_args, linear_args)


def bind_linear_call(fun: Callable | None, fun_transpose: Callable, residual_args, linear_args,
                     refusal: str = ""):
    """`linear_call` as the primitive records it. Without `fun` (a map known only by its
    transpose), the call stands for its value at a zero `linear_args`, which is zero, and
    transposing the transpose back into it raises TypeError(`refusal`)."""
    from meshsim import _core
    from meshsim._src import tracing
    res_leaves, res_tree = tree_util.tree_flatten(residual_args)
    lin_leaves, lin_tree = tree_util.tree_flatten(linear_args)
    res_leaves = [core.asarray_value(x) for x in res_leaves]
    lin_leaves = [core.asarray_value(x) for x in lin_leaves]
    res_avals = [x.aval for x in res_leaves]
    lin_avals = [x.aval for x in lin_leaves]
    pair_tree = tree_util.tree_structure((tree_util.tree_unflatten(res_tree, res_leaves),
                                          tree_util.tree_unflatten(lin_tree, lin_leaves)))

    def zeros_at(res, lin):
        return tree_util.tree_map(lambda v: v * 0, lin)

    callee, callee_consts, out_tree = tracing.trace_flat(fun or zeros_at, pair_tree, [*res_avals, *lin_avals])
    out_avals = callee.out_avals

    def transpose_flat(res, ct):
        lin_ct = fun_transpose(res, ct)
        leaves = [None] * len(lin_avals) if lin_ct is None else lin_tree.flatten_up_to(lin_ct)
        return [core.Array.from_numpy(np.zeros(a.shape, a.dtype), weak_type=a.weak_type) if c is None
                else core.convert_element_type(c, a.dtype, a.weak_type) if core.typeof(c).dtype != a.dtype
                else c for c, a in zip(leaves, lin_avals)]

    ct_tree = tree_util.tree_structure((tree_util.tree_unflatten(res_tree, res_leaves),
                                        tree_util.tree_unflatten(out_tree, list(range(len(out_avals))))))
    transpose, transpose_consts, _ = tracing.trace_flat(transpose_flat, ct_tree, [*res_avals, *out_avals])
    params = dict(call_jaxpr=callee, transpose_jaxpr=transpose, num_res=len(res_leaves),
                  num_callee_consts=len(callee_consts), callee_refusal="" if fun else refusal,
                  transpose_refusal="")
    outs = _core.bind("linear_call", (*res_leaves, *lin_leaves, *callee_consts, *transpose_consts), params)
    return tree_util.tree_unflatten(out_tree, outs)
