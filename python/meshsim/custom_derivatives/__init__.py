"""meshsim.custom_derivatives (as jax.custom_derivatives)."""
from meshsim._src.ad import custom_jvp, custom_vjp  # noqa: F401
from meshsim._src.custom_gradient import (CustomVJPPrimal, SymbolicZero,  # noqa: F401
                                          closure_convert, custom_gradient,
                                          custom_vjp_primal_tree_values, linear_call,
                                          zero_from_primal)
from meshsim._src.primitive_handles import handle as _handle  # noqa: E402

# The primitives of the custom_jvp and custom_vjp equations make_jaxpr shows.
custom_jvp_call_p = _handle("custom_jvp_call")
custom_vjp_call_p = _handle("custom_vjp_call")
