"""meshsim.numpy: the NumPy API on meshsim arrays (as jax.numpy)."""
from meshsim._src.numpy.namespace import *  # noqa: F401,F403
from meshsim._src.numpy.namespace import _getitem  # noqa: F401  (Array.__getitem__)
from meshsim.numpy import fft, linalg  # noqa: F401,E402
# `jnp.ndarray` is `jax.Array`, the abstract type of concrete arrays, tracers and key arrays.
from meshsim._src.basearray import Array as ndarray  # noqa: F401,E402
