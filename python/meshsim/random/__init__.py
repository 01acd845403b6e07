"""meshsim.random: JAX's threefry2x32 PRNG (as jax.random)."""
from meshsim._src.random import *  # noqa: F401,F403
