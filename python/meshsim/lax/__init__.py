"""meshsim.lax: the primitive operations (as jax.lax)."""
from meshsim._src.lax.namespace import *  # noqa: F401,F403
from meshsim.lax import linalg  # noqa: F401,E402  (jax.lax.linalg)
from meshsim._src.jax_internals_compat.user_primitives import applying as _applying  # noqa: E402

# The primitive object libraries key their tables by (equinox's jaxpr finalisation).
stop_gradient_p = _applying("stop_gradient", stop_gradient)  # noqa: F405
