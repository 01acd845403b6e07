"""meshsim.scipy.sparse (as jax.scipy.sparse): the iterative linear solvers of `linalg`."""
from meshsim.scipy.sparse import linalg  # noqa: F401
