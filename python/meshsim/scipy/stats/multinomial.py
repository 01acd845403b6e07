"""meshsim.scipy.stats.multinomial (as jax.scipy.stats.multinomial)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    multinomial_logpmf as logpmf, multinomial_pmf as pmf)
