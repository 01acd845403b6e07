"""meshsim.experimental.pjit (as jax.experimental.pjit): `pjit` is `jit`."""
from meshsim._src.api import jit as pjit  # noqa: F401
