"""meshsim.custom_derivatives (as jax.custom_derivatives)."""
from meshsim._src.ad import custom_jvp, custom_vjp  # noqa: F401
from meshsim._src.custom_gradient import custom_gradient  # noqa: F401
