"""`jax.api_util`: flattening a wrapped function's inputs and outputs, and describing it."""
from __future__ import annotations

import dataclasses
from typing import Any

from meshsim._src import tree_public, tree_util
from meshsim._src.jax_internals_compat.extend.linear_util import WrappedFun


@dataclasses.dataclass(frozen=True)
class DebugInfo:
    """What a traced function is, for error messages: its role, name and argument tree."""
    traced_for: str
    func_src_info: str
    arg_names: tuple | None = None
    result_paths: tuple | None = None


def debug_info(traced_for: str, fun, args, kwargs, **_options) -> DebugInfo:
    name = getattr(fun, "__qualname__", None) or getattr(fun, "__name__", repr(fun))
    return DebugInfo(traced_for, name)


class _OutTree:
    """The output tree of a flattened function, known once it has been called."""

    def __init__(self):
        self._tree = None

    def store(self, tree) -> None:
        self._tree = tree

    def __call__(self) -> Any:
        if self._tree is None:
            raise ValueError("the output tree is known only after the flattened function ran")
        return self._tree


def flatten_fun(fun: WrappedFun, in_tree) -> tuple[WrappedFun, _OutTree]:
    """`fun(*args, **kwargs)` as a function of the leaves of `(args, kwargs)` (tree `in_tree`)
    returning its output's leaves; the output tree is read from the second result."""
    out_tree = _OutTree()

    def flat(*leaves):
        args, kwargs = tree_util.tree_unflatten(in_tree, leaves)
        out_leaves, tree = tree_public.tree_flatten(fun.call_wrapped(*args, **kwargs))
        out_tree.store(tree)
        return out_leaves

    return WrappedFun(flat, fun.debug_info), out_tree


def flatten_fun_nokwargs(fun: WrappedFun, in_tree) -> tuple[WrappedFun, _OutTree]:
    """As `flatten_fun` for a function of positional arguments only (tree of the args tuple)."""
    out_tree = _OutTree()

    def flat(*leaves):
        args = tree_util.tree_unflatten(in_tree, leaves)
        out_leaves, tree = tree_public.tree_flatten(fun.call_wrapped(*args))
        out_tree.store(tree)
        return out_leaves

    return WrappedFun(flat, fun.debug_info), out_tree
