"""meshsim.scipy.integrate (as jax.scipy.integrate)."""
from meshsim._src.numpy.reductions import trapezoid  # noqa: F401
