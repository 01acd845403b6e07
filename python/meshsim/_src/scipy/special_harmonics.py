"""`jax.scipy.special.sph_harm_y`: spherical harmonics Y_n^m(theta, phi) with theta the polar
and phi the azimuthal angle, from the normalized associated Legendre functions of cos(theta)
(with the Condon-Shortley phase) built up to degree `n_max` by the standard three-term
recurrences: the diagonal P_m^m from sin(theta)^m, the first off-diagonal P_{m+1}^m from it, and
each higher degree from the two below."""
from __future__ import annotations

import numpy as np

from meshsim._src import core, errors
from meshsim._src.numpy import namespace as jnp

__all__ = ["sph_harm_y"]


def _normalized_legendre(n_max: int, x):
    """P[m, l, k]: the normalized associated Legendre function of order m and degree l at
    x[k] (zero where m > l), as one (n_max+1, n_max+1, len(x)) array."""
    zero = jnp.zeros_like(x)
    sine = jnp.sqrt(1.0 - x * x)
    rows = []
    diagonal = jnp.full_like(x, 0.5 / np.sqrt(np.pi))
    for m in range(n_max + 1):
        if m > 0:
            diagonal = -np.sqrt(1.0 + 0.5 / m) * sine * diagonal
        row = [zero] * m + [diagonal]
        if m + 1 <= n_max:
            row.append(np.sqrt(2.0 * m + 3.0) * x * diagonal)
        for degree in range(m + 2, n_max + 1):
            l2, m2 = degree * degree, m * m
            d0 = np.sqrt((4.0 * l2 - 1.0) / (l2 - m2))
            d1 = np.sqrt((2.0 * degree + 1.0) * ((degree - 1.0) ** 2 - m2) / ((2.0 * degree - 3.0) * (l2 - m2)))
            row.append(d0 * x * row[-1] - d1 * row[-2])
        rows.append(jnp.stack(row))
    return jnp.stack(rows)


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """Y_n^m(theta, phi) for degrees `n` and orders `m` (integer arrays of one length, or
    scalars), polar angles `theta` and azimuthal angles `phi`. `n_max` (default: the largest
    `n`, which must then be concrete) bounds the degrees computed."""
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to jax.scipy.special.sph_harm_y is not supported.")
    if jnp.isscalar(theta):
        theta = jnp.array([theta])
    if n_max is None:
        if isinstance(n, core.Tracer):
            raise errors.ConcretizationTypeError(
                n, "The `n_max` argument of `jnp.scipy.special.sph_harm` must be statically specified "
                   "to use `sph_harm` within JAX transformations.")
        n_max = np.max(np.asarray(n))
    n_max = int(n_max)
    n, m, theta, phi = (jnp.asarray(v) for v in (n, m, theta, phi))
    legendre = _normalized_legendre(n_max, jnp.cos(theta))
    value = legendre.at[abs(m), n, jnp.arange(n.shape[0] if n.ndim else 1)].get(mode="clip")
    angle = abs(m) * phi
    harmonic = jnp.asarray(value * jnp.cos(angle)) + 1j * jnp.asarray(value * jnp.sin(angle))
    harmonic = harmonic.astype(jnp.result_type(value.dtype, np.complex64))
    return jnp.where(m < 0, (-1.0) ** abs(m) * jnp.conjugate(harmonic), harmonic)
