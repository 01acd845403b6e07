"""meshsim.scipy.stats (as jax.scipy.stats)."""
from meshsim.scipy.stats import (  # noqa: F401
    bernoulli, beta, cauchy, expon, gamma, laplace, logistic, norm, poisson, t, uniform)
