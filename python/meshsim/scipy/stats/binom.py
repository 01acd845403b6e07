"""meshsim.scipy.stats.binom (as jax.scipy.stats.binom)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    binom_logpmf as logpmf, binom_pmf as pmf)
