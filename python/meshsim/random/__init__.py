"""meshsim.random: JAX's threefry2x32 PRNG (as jax.random)."""
from meshsim._src.random import *  # noqa: F401,F403
from meshsim._src.random_linalg import multivariate_normal, orthogonal  # noqa: F401,E402
from meshsim._src.random_gamma import *  # noqa: F401,F403,E402
from meshsim._src.random_discrete import *  # noqa: F401,F403,E402
