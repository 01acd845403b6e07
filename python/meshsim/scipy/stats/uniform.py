"""meshsim.scipy.stats.uniform (as jax.scipy.stats.uniform)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    uniform_logpdf as logpdf, uniform_pdf as pdf, uniform_cdf as cdf, uniform_ppf as ppf)
