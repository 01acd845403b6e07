"""The special functions `jax.lax` exposes that meshsim composes (betainc, random_gamma_grad),
as `jax.scipy.special` composes them (`_src/scipy/special_series.py`); lgamma, digamma,
polygamma, zeta, igamma, igammac, igamma_grad_a, bessel_i0e and bessel_i1e are primitives
(`elementwise.py`)."""
from __future__ import annotations

import numpy as np

from meshsim._src import core
from meshsim._src.dtype_kinds import issubdtype

__all__ = ["betainc", "random_gamma_grad"]


def check_floating(name: str, *args):
    """JAX's dtype rule for its special-function primitives: every operand floating (a Python
    float counts as a weak float32, an int does not) and, for several, of one dtype."""
    dtypes = [core.asarray_value(a).dtype for a in args]
    for position, dtype in enumerate(dtypes):
        if not issubdtype(dtype, np.floating):
            where = f" at position {position}" if len(args) > 1 else ""
            raise TypeError(f"{name} does not accept dtype {dtype.name}{where}. Accepted dtypes{where} are "
                            "subtypes of floating.")
    if any(d != dtypes[0] for d in dtypes):
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(d.name for d in dtypes)}.")


def _series():
    from meshsim._src.scipy import special_series
    return special_series


def random_gamma_grad(a, x):
    """The derivative of a Gamma(a, 1) sample x in its shape a, holding its quantile fixed:
    -(dP/da) / (dP/dx) with P(a, x) the distribution function. The density x^(a-1) e^-x /
    Gamma(a) divides out of the series (continued fraction) form of P (Q), so the ratio stays
    finite where the density underflows."""
    from meshsim._src.numpy import namespace as jnp
    from meshsim._src.ad import vjp
    from meshsim._src.lax.elementwise import digamma
    series = _series()
    a, x = jnp.broadcast_arrays(*series._float(a, x))
    safe_x = jnp.where(x > 0, x, jnp.ones_like(x))
    use_fraction = (safe_x > 1) & (safe_x > a)
    series_x = jnp.where(use_fraction, 0.5 * a, safe_x)
    fraction_x = jnp.where(use_fraction, safe_x, a + 2.0)

    def scaled(a_):  # P / prefactor below, Q / prefactor above
        return jnp.where(use_fraction, series._gamma_fraction_value(a_, fraction_x),
                         series._gamma_series_sum(a_, series_x))

    value, pullback = vjp(scaled, a)
    (d_value,) = pullback(jnp.ones_like(value))
    d_log_prefactor = jnp.log(safe_x) - digamma(a)
    grad = safe_x * (value * d_log_prefactor + d_value)
    grad = jnp.where(use_fraction, grad, -grad)
    grad = jnp.where(x == 0, jnp.zeros_like(grad), grad)
    return jnp.where((x < 0) | (a <= 0) | jnp.isnan(x) | jnp.isnan(a), jnp.nan, grad)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    check_floating("regularized_incomplete_beta", a, b, x)
    return _series().betainc(a, b, x)

