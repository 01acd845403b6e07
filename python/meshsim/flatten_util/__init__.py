"""meshsim.flatten_util (as jax.flatten_util)."""
from meshsim._src.flatten_util import ravel_pytree  # noqa: F401
