"""meshsim.scipy.stats.gamma (as jax.scipy.stats.gamma)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    gamma_logpdf as logpdf, gamma_pdf as pdf)
from meshsim._src.scipy.stats_more import (  # noqa: F401,E402
    gamma_cdf as cdf, gamma_logcdf as logcdf, gamma_logsf as logsf, gamma_sf as sf)
