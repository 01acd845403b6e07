"""meshsim.ad_checkpoint (as jax.ad_checkpoint): checkpoint, checkpoint_name, policies and
what they may return, and the values a function saves for its backward pass."""
from meshsim._src.ad import (Offloadable, Recompute, Saveable, checkpoint,  # noqa: F401
                             checkpoint_name, checkpoint_policies, remat)
from meshsim._src.ad_staging import print_saved_residuals, saved_residuals  # noqa: F401
