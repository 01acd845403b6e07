"""meshsim.example_libraries.optimizers (as jax.example_libraries.optimizers)."""
from meshsim._src.example_libraries.optimizers import *  # noqa: F401,F403
from meshsim._src.example_libraries.optimizers import __all__  # noqa: F401
