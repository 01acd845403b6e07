"""`jax._src.tree_util`: `_registry`, the pytree node types, as a read-only mapping over
meshsim's own registry (flax asks whether a type is a pytree node with `in`)."""
from __future__ import annotations

from collections.abc import Mapping

from meshsim._src import tree_kinds, tree_public


class _NodeTypeRegistry(Mapping):
    """Type -> how meshsim flattens it; `t in _registry` is true for every node type,
    builtin or registered (namedtuples count once seen, as meshsim registers them lazily)."""

    def __getitem__(self, node_type):
        if node_type not in self:
            raise KeyError(node_type)
        return tree_kinds._kind_of_type(node_type)

    def __contains__(self, node_type):
        return isinstance(node_type, type) and tree_public.is_tree_node(node_type)

    def __iter__(self):
        return iter([t for t in tree_kinds._kinds if t in self])

    def __len__(self):
        return len(list(iter(self)))


_registry = _NodeTypeRegistry()
