"""The pytree functions of ``jax.tree_util`` and ``jax.tree``: tree_util.py's, with the
types registered by ``register_traced_leaf`` seen as leaves.

A typed PRNG key array is a leaf in JAX: ``jax.tree.map(f, keys)`` calls ``f`` on the
keys. Here a key is a Python object over uint32 key data, and the transforms (jit,
vmap, scan, shard_map, grad, custom_vjp, callbacks, device_put) trace that data: they
flatten with tree_util.py, through which a key is a node with its data as one child.
Users flatten with the functions below, which stop at the key. The two views agree on
every other type, and a treedef from either unflattens what it flattened.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from meshsim._src import tree_util
from meshsim._src.tree_util import PyTreeDef, Unspecified

_traced_leaf_types: tuple[type, ...] = ()


def register_traced_leaf(cls: type, flatten, unflatten) -> None:
    """Makes ``cls`` a pytree node for the transforms (``flatten(x) -> (children, aux)``)
    and a leaf for users."""
    global _traced_leaf_types
    tree_util.register_pytree_node(cls, flatten, unflatten)
    _traced_leaf_types += (cls,)


def _is_traced_leaf(x) -> bool:
    return isinstance(x, _traced_leaf_types)


def _users_is_leaf(is_leaf):
    if is_leaf is None:
        return _is_traced_leaf
    return lambda x: is_leaf(x) or _is_traced_leaf(x)


def _users_path_is_leaf(is_leaf, is_leaf_takes_path: bool):
    """The is_leaf for the *_with_path functions, which then always take the path."""
    if is_leaf is None:
        return lambda _, x: _is_traced_leaf(x)
    if is_leaf_takes_path:
        return lambda path, x: is_leaf(path, x) or _is_traced_leaf(x)
    return lambda _, x: is_leaf(x) or _is_traced_leaf(x)


def _public(internal):
    """Marks ``internal``'s public twin (for its name and docstring)."""
    return functools.wraps(internal, assigned=("__name__", "__qualname__", "__doc__"), updated=())


@_public(tree_util.tree_flatten)
def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
    return tree_util.tree_flatten(tree, _users_is_leaf(is_leaf))


@_public(tree_util.tree_leaves)
def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    return tree_util.tree_leaves(tree, _users_is_leaf(is_leaf))


@_public(tree_util.tree_structure)
def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return tree_util.tree_structure(tree, _users_is_leaf(is_leaf))


@_public(tree_util.tree_flatten_with_path)
def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False):
    return tree_util.tree_flatten_with_path(tree, _users_path_is_leaf(is_leaf, is_leaf_takes_path),
                                            is_leaf_takes_path=True)


@_public(tree_util.tree_leaves_with_path)
def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False):
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


@_public(tree_util.tree_map)
def tree_map(f: Callable[..., Any], tree: Any, *rest: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> Any:
    return tree_util.tree_map(f, tree, *rest, is_leaf=_users_is_leaf(is_leaf))


@_public(tree_util.tree_map_with_path)
def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any,
                       is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    return tree_util.tree_map_with_path(f, tree, *rest,
                                        is_leaf=_users_path_is_leaf(is_leaf, is_leaf_takes_path),
                                        is_leaf_takes_path=True)


@_public(tree_util.tree_reduce)
def tree_reduce(function: Callable[[Any, Any], Any], tree: Any,
                initializer: Any = Unspecified(), is_leaf: Callable[[Any], bool] | None = None) -> Any:
    return tree_util.tree_reduce(function, tree, initializer, _users_is_leaf(is_leaf))


@_public(tree_util.tree_reduce_associative)
def tree_reduce_associative(operation: Callable[[Any, Any], Any], tree: Any, *,
                            identity: Any = Unspecified(),
                            is_leaf: Callable[[Any], bool] | None = None) -> Any:
    return tree_util.tree_reduce_associative(operation, tree, identity=identity,
                                             is_leaf=_users_is_leaf(is_leaf))


@_public(tree_util.tree_all)
def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return tree_util.tree_all(tree, is_leaf=_users_is_leaf(is_leaf))


@_public(tree_util.tree_broadcast)
def tree_broadcast(prefix_tree: Any, full_tree: Any,
                   is_leaf: Callable[[Any], bool] | None = None) -> Any:
    return tree_util.tree_broadcast(prefix_tree, full_tree, _users_is_leaf(is_leaf))


@_public(tree_util.tree_transpose)
def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    return tree_util.transpose_flat(outer_treedef, inner_treedef, *tree_flatten(pytree_to_transpose))


@_public(tree_util.all_leaves)
def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return tree_util.all_leaves(iterable, _users_is_leaf(is_leaf))


def is_tree_node(typ: type) -> bool:
    return tree_util.is_tree_node(typ) and not issubclass(typ, _traced_leaf_types)


def _check_node(tree) -> None:
    if _is_traced_leaf(tree):
        raise ValueError(f"can't tree-flatten type: {type(tree)}")


@_public(tree_util.flatten_one_level)
def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Hashable]:
    _check_node(tree)
    return tree_util.flatten_one_level(tree)


@_public(tree_util.flatten_one_level_with_keys)
def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[Any, Any]], Hashable]:
    _check_node(tree)
    return tree_util.flatten_one_level_with_keys(tree)
