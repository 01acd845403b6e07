"""meshsim.lax: the primitive operations (as jax.lax)."""
from meshsim._src.lax.namespace import *  # noqa: F401,F403
from meshsim.lax import linalg  # noqa: F401,E402  (jax.lax.linalg)
from meshsim._src.primitive_handles import lax_handles as _lax_handles  # noqa: E402

# JAX's primitive objects (`lax.sin_p`, ...), the ones make_jaxpr's equations hold.
globals().update(_lax_handles())
