"""meshsim.distributed (as jax.distributed), for a job of one process."""
from meshsim._src.distributed import initialize, is_initialized, shutdown  # noqa: F401
