"""meshsim.scipy.stats.beta (as jax.scipy.stats.beta)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    beta_logpdf as logpdf, beta_pdf as pdf)
