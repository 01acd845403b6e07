"""`jax.interpreters.batching`: the tables a library registers its primitives' batching rules
in (see user_primitives for how meshsim applies such primitives)."""
from meshsim._src.jax_internals_compat.user_primitives import (  # noqa: F401
    axis_primitive_batchers, primitive_batchers)
