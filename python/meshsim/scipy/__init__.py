"""meshsim.scipy (as jax.scipy)."""
from meshsim.scipy import special  # noqa: F401
