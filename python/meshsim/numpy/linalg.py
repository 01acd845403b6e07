"""meshsim.numpy.linalg: norms and matrix functions (as jax.numpy.linalg)."""
from meshsim._src.numpy.linalg_namespace import *  # noqa: F401,F403
