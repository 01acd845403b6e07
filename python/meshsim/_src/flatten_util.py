"""`ravel_pytree`: a pytree of arrays as one flat vector, and the function
that splits such a vector back into the pytree."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from meshsim._src import tree_util
from meshsim._src.numpy import dtypes as np_dtypes


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """Concatenates the raveled leaves of `pytree` (promoted to their common
    dtype; an empty float32 vector for no leaves) and returns it with the
    inverse, which casts each piece back to its leaf's dtype."""
    from meshsim._src.numpy import namespace as jnp
    leaves, treedef = tree_util.tree_flatten(pytree)
    if not leaves:
        return jnp.zeros((0,), "float32"), functools.partial(_unravel, treedef, (), (), None, None)
    leaves = [jnp.asarray(x) for x in leaves]
    from_dtypes = tuple(np.dtype(x.dtype) for x in leaves)
    to_dtype = np_dtypes.result_type(*from_dtypes)
    sizes = tuple(int(np.size(x)) for x in leaves)
    shapes = tuple(np.shape(x) for x in leaves)
    flat = jnp.concatenate([jnp.ravel(x.astype(to_dtype)) for x in leaves])
    # One dtype throughout: the inverse keeps whatever dtype it is given.
    if all(d == to_dtype for d in from_dtypes):
        from_dtypes, to_dtype = None, None
    return flat, functools.partial(_unravel, treedef, sizes, shapes, from_dtypes, to_dtype)


def _unravel(treedef, sizes, shapes, from_dtypes, to_dtype, flat):
    from meshsim._src.numpy import namespace as jnp
    if to_dtype is not None and np.dtype(flat.dtype) != to_dtype:
        raise TypeError(f"unravel function given array of dtype {flat.dtype}, "
                        f"but expected dtype {to_dtype}")
    pieces = jnp.split(flat, np.cumsum(sizes)[:-1].tolist()) if sizes else []
    leaves = [p.reshape(s) for p, s in zip(pieces, shapes)]
    if from_dtypes is not None:
        leaves = [leaf.astype(d) for leaf, d in zip(leaves, from_dtypes)]
    return tree_util.tree_unflatten(treedef, leaves)
