"""meshsim.custom_derivatives (as jax.custom_derivatives)."""
from meshsim._src.ad import custom_jvp, custom_vjp  # noqa: F401
from meshsim._src.custom_gradient import (CustomVJPPrimal, SymbolicZero,  # noqa: F401
                                          closure_convert, custom_gradient,
                                          custom_vjp_primal_tree_values, linear_call,
                                          zero_from_primal)
from meshsim._src.jax_internals_compat import unsupported as _unsupported  # noqa: E402
from meshsim._src.jax_internals_compat.user_primitives import applying as _applying  # noqa: E402
from meshsim._src.primitive_handles import handle as _handle  # noqa: E402


def _custom_jvp_call(*args, **params):
    raise _unsupported("jax.custom_derivatives.custom_jvp_call_p.bind",
                       "custom_jvp functions are traced through meshsim's own rule")


# The primitive object libraries key their tables by; meshsim's custom_jvp does not bind it.
custom_jvp_call_p = _applying("custom_jvp_call", _custom_jvp_call, multiple_results=True)

# The primitive of the custom_vjp equations make_jaxpr shows (and of custom_jvp functions,
# which meshsim traces by the same rule).
custom_vjp_call_p = _handle("custom_vjp_call")
