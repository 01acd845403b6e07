"""meshsim.scipy.stats (as jax.scipy.stats)."""
from meshsim.scipy.stats import (  # noqa: F401
    bernoulli, beta, cauchy, expon, gamma, laplace, logistic, multivariate_normal, norm, poisson, t,
    uniform)
from meshsim._src.scipy.stats_more import mode, rankdata, sem  # noqa: F401,E402
