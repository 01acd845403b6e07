"""meshsim.scipy.stats.gennorm (as jax.scipy.stats.gennorm)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    gennorm_cdf as cdf, gennorm_logpdf as logpdf, gennorm_pdf as pdf)
