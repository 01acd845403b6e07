"""meshsim.scipy.linalg (as jax.scipy.linalg)."""
from meshsim._src.scipy.linalg import *  # noqa: F401,F403
from meshsim._src.scipy.linalg_special import *  # noqa: F401,F403,E402
from meshsim._src.scipy.linalg_schur import *  # noqa: F401,F403,E402
