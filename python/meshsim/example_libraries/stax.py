"""meshsim.example_libraries.stax (as jax.example_libraries.stax)."""
from meshsim._src.example_libraries.stax import *  # noqa: F401,F403
from meshsim._src.example_libraries.stax import __all__  # noqa: F401
