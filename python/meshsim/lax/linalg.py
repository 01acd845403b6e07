"""meshsim.lax.linalg: matrix decompositions (as jax.lax.linalg)."""
from meshsim._src.lax.decompositions import *  # noqa: F401,F403
