"""meshsim.scipy.stats.poisson (as jax.scipy.stats.poisson)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    poisson_logpmf as logpmf, poisson_pmf as pmf)
