"""meshsim.scipy.stats.dirichlet (as jax.scipy.stats.dirichlet)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    dirichlet_logpdf as logpdf, dirichlet_pdf as pdf)
