"""meshsim.scipy.stats.beta (as jax.scipy.stats.beta)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    beta_logpdf as logpdf, beta_pdf as pdf)
from meshsim._src.scipy.stats_more import (  # noqa: F401,E402
    beta_cdf as cdf, beta_logcdf as logcdf, beta_logsf as logsf, beta_sf as sf)
