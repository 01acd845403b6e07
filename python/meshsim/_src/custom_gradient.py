"""`custom_gradient`: a function that returns its value together with the
function that maps the output cotangent to the inputs' cotangents.

Built on `custom_vjp`. The rule may close over the forward pass's
intermediates; the backward pass runs `fun` again on the saved arguments to
rebuild that closure (the same values, recomputed rather than stored)."""
from __future__ import annotations

import functools
from typing import Callable

from meshsim._src import tree_util
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
