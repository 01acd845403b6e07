"""meshsim.scipy.stats.logistic (as jax.scipy.stats.logistic)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    logistic_logpdf as logpdf, logistic_pdf as pdf, logistic_cdf as cdf, logistic_sf as sf,
    logistic_ppf as ppf, logistic_isf as isf)
