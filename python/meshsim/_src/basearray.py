"""`meshsim.Array` as user code sees it: JAX's abstract `jax.Array`, of which
concrete arrays, tracers (inside jit, grad, shard_map) and typed PRNG key
arrays are all instances, so `isinstance(x, jax.Array)` holds while tracing
exactly as it does in JAX. The concrete class is `meshsim._core.ArrayImpl`, named as
JAX names its arrays."""
from __future__ import annotations

import abc

from meshsim import _core


class Array(abc.ABC):
    """The type of every meshsim array value (concrete or traced)."""
    __slots__ = ()


Array.register(_core.ArrayImpl)
Array.register(_core.Tracer)
