"""meshsim.scipy.stats.expon (as jax.scipy.stats.expon)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    expon_logpdf as logpdf, expon_pdf as pdf, expon_cdf as cdf, expon_logcdf as logcdf,
    expon_sf as sf, expon_logsf as logsf, expon_ppf as ppf)
