"""meshsim.scipy.stats.vonmises (as jax.scipy.stats.vonmises)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    vonmises_logpdf as logpdf, vonmises_pdf as pdf)
