"""meshsim.ad_checkpoint (as jax.ad_checkpoint): checkpoint, checkpoint_name, policies."""
from meshsim._src.ad import checkpoint, checkpoint_name, checkpoint_policies, remat  # noqa: F401
