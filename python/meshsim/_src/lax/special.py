"""The special functions `jax.lax` exposes (igamma, igammac, betainc, zeta, polygamma,
bessel_i0e, bessel_i1e), composed as `jax.scipy.special` composes them
(`_src/scipy/special_series.py`)."""
from __future__ import annotations

__all__ = ["igamma", "igammac", "betainc", "zeta", "polygamma", "bessel_i0e", "bessel_i1e"]


def _series():
    from meshsim._src.scipy import special_series
    return special_series


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    return _series().gammainc(a, x)


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x)."""
    return _series().gammaincc(a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    return _series().betainc(a, b, x)


def zeta(x, q):
    """The Hurwitz zeta function."""
    return _series().zeta(x, q)


def polygamma(m, x):
    """The m-th derivative of the digamma function (m a float array of x's dtype)."""
    return _series().lax_polygamma(m, x)


def bessel_i0e(x):
    """exp(-|x|) I0(x)."""
    return _series().i0e(x)


def bessel_i1e(x):
    """exp(-|x|) I1(x)."""
    return _series().i1e(x)
