"""meshsim.scipy (as jax.scipy)."""
from meshsim.scipy import fft, linalg, special  # noqa: F401
