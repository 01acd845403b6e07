"""meshsim.lax: the primitive operations (as jax.lax)."""
from meshsim._src.lax.namespace import *  # noqa: F401,F403
from meshsim.lax import linalg  # noqa: F401,E402  (jax.lax.linalg)
