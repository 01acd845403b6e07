"""meshsim.scipy.stats.nbinom (as jax.scipy.stats.nbinom)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    nbinom_logpmf as logpmf, nbinom_pmf as pmf)
