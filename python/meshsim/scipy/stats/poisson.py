"""meshsim.scipy.stats.poisson (as jax.scipy.stats.poisson)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    poisson_logpmf as logpmf, poisson_pmf as pmf)
from meshsim._src.scipy.stats_more import poisson_cdf as cdf  # noqa: F401,E402
from meshsim._src.scipy.stats_families import poisson_entropy as entropy  # noqa: F401,E402
