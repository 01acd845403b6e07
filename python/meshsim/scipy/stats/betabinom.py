"""meshsim.scipy.stats.betabinom (as jax.scipy.stats.betabinom)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    betabinom_logpmf as logpmf, betabinom_pmf as pmf)
