"""`jax._src.xla_bridge`: backend queries (`backends_are_initialized`, ...), meshsim's."""
from meshsim._src.xla_bridge import *  # noqa: F401,F403
