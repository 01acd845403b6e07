"""`jax._src.tree_util`: `_registry`, the pytree node types, as a read-only mapping over
meshsim's own registry (flax asks whether a type is a pytree node with `in`)."""
from __future__ import annotations

from collections.abc import Mapping

from meshsim._src import tree_kinds


class _NodeTypeRegistry(Mapping):
    """Type -> how meshsim flattens it; `t in _registry` is true for every node type,
    builtin or registered (namedtuples count once seen, as meshsim registers them lazily)."""

    def __getitem__(self, node_type):
        kind = tree_kinds._kind_of_type(node_type) if isinstance(node_type, type) else None
        if kind is None:
            raise KeyError(node_type)
        return kind

    def __contains__(self, node_type):
        return isinstance(node_type, type) and tree_kinds._kind_of_type(node_type) is not None

    def __iter__(self):
        return iter(list(tree_kinds._kinds))

    def __len__(self):
        return len(tree_kinds._kinds)


_registry = _NodeTypeRegistry()
