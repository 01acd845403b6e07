"""meshsim.numpy.linalg: norms and matrix functions (as jax.numpy.linalg)."""
from meshsim._src.numpy.matrix import *  # noqa: F401,F403
from meshsim._src.numpy.decompositions import *  # noqa: F401,F403,E402

