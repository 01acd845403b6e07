"""meshsim.scipy.stats.bernoulli (as jax.scipy.stats.bernoulli)."""
from meshsim._src.scipy.stats import (  # noqa: F401
    bernoulli_logpmf as logpmf, bernoulli_pmf as pmf, bernoulli_cdf as cdf,
    bernoulli_ppf as ppf)
