"""meshsim.scipy.stats.norm (as jax.scipy.stats.norm)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    norm_logpdf as logpdf, norm_pdf as pdf, norm_cdf as cdf, norm_logcdf as logcdf,
    norm_sf as sf, norm_logsf as logsf, norm_ppf as ppf, norm_isf as isf)
