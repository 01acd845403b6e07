"""meshsim.scipy.stats.laplace (as jax.scipy.stats.laplace)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    laplace_logpdf as logpdf, laplace_pdf as pdf, laplace_cdf as cdf)
