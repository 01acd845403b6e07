"""meshsim.nn.initializers: parameter initializers (as jax.nn.initializers)."""
from meshsim._src.initializers import *  # noqa: F401,F403
