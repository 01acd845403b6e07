"""The ``jax.tree`` namespace: short names for the pytree utilities."""
from meshsim._src.tree_util import (  # noqa: F401
    static,
    tree_unflatten as unflatten,
)
from meshsim._src.tree_public import (  # noqa: F401
    tree_all as all,
    tree_broadcast as broadcast,
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_leaves_with_path as leaves_with_path,
    tree_map as map,
    tree_map_with_path as map_with_path,
    tree_reduce as reduce,
    tree_reduce_associative as reduce_associative,
    tree_structure as structure,
    tree_transpose as transpose,
)
