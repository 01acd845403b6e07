"""meshsim.scipy.stats.geom (as jax.scipy.stats.geom)."""
from meshsim._src.scipy.stats_families import (  # noqa: F401
    geom_logpmf as logpmf, geom_pmf as pmf)
