"""meshsim.scipy.stats.multivariate_normal (as jax.scipy.stats.multivariate_normal)."""
from meshsim._src.scipy.stats_more import (  # noqa: F401
    multivariate_normal_logpdf as logpdf, multivariate_normal_pdf as pdf)
