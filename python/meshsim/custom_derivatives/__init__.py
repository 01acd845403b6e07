"""meshsim.custom_derivatives (as jax.custom_derivatives)."""
from meshsim._src.ad import custom_jvp, custom_vjp  # noqa: F401
from meshsim._src.custom_gradient import (closure_convert, custom_gradient,  # noqa: F401
                                          linear_call, zero_from_primal)
