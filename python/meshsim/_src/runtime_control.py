"""Process-wide controls JAX programs use: `disable_jit` (config.py's, re-exported; the
other flags that are context managers are in flags.py),
`clear_caches`, `live_arrays`, `linear_transpose`, and process queries."""
from __future__ import annotations

import gc
from typing import Callable

from meshsim import _core
from meshsim._src import api, tree_util
from meshsim._src.config import disable_jit  # noqa: F401 - re-exported


def effects_barrier() -> None:
    """Waits until every dispatched program has finished."""
    _core.wait_all_dispatched()


def clear_caches() -> None:
    """Empties every jitted function's cache of traced programs."""
    for fn in list(api._ALL_JITTED):
        fn.clear_cache()


def live_arrays(platform: str | None = None) -> list:
    """Every array that is alive (not deleted) in this process."""
    return [x for x in gc.get_objects() if type(x) is _core.ArrayImpl and not x.is_deleted()]


def linear_transpose(fun: Callable, *primals, reduce_axes=()) -> Callable:
    """The transpose of the linear function `fun` at inputs shaped like
    `primals`: maps a cotangent of its output to a tuple of cotangents of its inputs."""
    from meshsim._src.abstract import ShapeDtypeStruct
    from meshsim._src.ad import vjp
    from meshsim._src.numpy import namespace as jnp
    # Only the primals' types matter to a linear function's transpose.
    primals = tree_util.tree_map(
        lambda p: jnp.zeros(p.shape, p.dtype) if isinstance(p, ShapeDtypeStruct) else p, primals)
    _, pullback = vjp(fun, *primals)

    def transposed(out_cotangent):
        return pullback(out_cotangent)
    return transposed


def process_indices() -> list[int]:
    return [0]
