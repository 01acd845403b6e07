"""meshsim.scipy.spatial (as jax.scipy.spatial)."""
from meshsim.scipy.spatial import transform  # noqa: F401
