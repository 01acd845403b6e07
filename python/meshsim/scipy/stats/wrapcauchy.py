"""meshsim.scipy.stats.wrapcauchy (as jax.scipy.stats.wrapcauchy)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    wrapcauchy_logpdf as logpdf, wrapcauchy_pdf as pdf)
