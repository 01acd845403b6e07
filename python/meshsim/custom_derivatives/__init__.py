"""meshsim.custom_derivatives (as jax.custom_derivatives)."""
from meshsim._src.ad import custom_jvp, custom_vjp  # noqa: F401
from meshsim._src.custom_gradient import (CustomVJPPrimal, SymbolicZero,  # noqa: F401
                                          closure_convert, custom_gradient,
                                          custom_vjp_primal_tree_values, linear_call,
                                          zero_from_primal)
