"""meshsim.numpy: the NumPy API on meshsim arrays (as jax.numpy)."""
from meshsim._src.numpy.namespace import *  # noqa: F401,F403
from meshsim._src.numpy.namespace import _getitem  # noqa: F401  (Array.__getitem__)
# A program's eager broadcast_to is a fresh buffer, as JAX's (meshsim's own functions use views).
from meshsim._src.numpy.structural import broadcast_to_eagerly_materialized as broadcast_to  # noqa: F401
from meshsim.numpy import fft, linalg  # noqa: F401,E402
# `jnp.ndarray` is `jax.Array`, the abstract type of concrete arrays, tracers and key arrays.
from meshsim._src.basearray import Array as ndarray  # noqa: F401,E402
