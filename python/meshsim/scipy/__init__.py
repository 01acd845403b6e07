"""meshsim.scipy (as jax.scipy)."""
from meshsim.scipy import linalg, special  # noqa: F401
