"""meshsim.scipy.stats.cauchy (as jax.scipy.stats.cauchy)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    cauchy_logpdf as logpdf, cauchy_pdf as pdf, cauchy_cdf as cdf, cauchy_logcdf as logcdf,
    cauchy_sf as sf, cauchy_logsf as logsf, cauchy_ppf as ppf, cauchy_isf as isf)
