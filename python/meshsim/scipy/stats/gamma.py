"""meshsim.scipy.stats.gamma (as jax.scipy.stats.gamma)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    gamma_logpdf as logpdf, gamma_pdf as pdf)
