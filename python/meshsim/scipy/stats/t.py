"""meshsim.scipy.stats.t (as jax.scipy.stats.t)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    t_logpdf as logpdf, t_pdf as pdf)
