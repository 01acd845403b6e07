"""meshsim.scipy.stats (as jax.scipy.stats)."""
from meshsim.scipy.stats import (  # noqa: F401
    bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm, geom, gumbel_l,
    gumbel_r, laplace, logistic, multinomial, multivariate_normal, nbinom, norm, pareto, poisson, t,
    truncnorm, uniform, vonmises, wrapcauchy)
from meshsim._src.scipy.stats_more import mode, rankdata, sem  # noqa: F401,E402
from meshsim._src.scipy.stats_kde import gaussian_kde  # noqa: F401,E402
