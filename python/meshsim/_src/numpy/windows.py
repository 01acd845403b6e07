"""The window functions of jax.numpy: `bartlett`, `blackman`, `hamming`,
`hanning` (float32 arrays of M points; empty for M < 1, [1.] for M == 1)."""
from __future__ import annotations

import numpy as np

__all__ = ["bartlett", "blackman", "hamming", "hanning", "i0", "kaiser"]


def _points(M: int):
    """The sample positions 2*pi*n/(M-1), or the degenerate window for M <= 1."""
    from meshsim._src.numpy import namespace as jnp
    M = int(M)
    if M < 1:
        return None, jnp.zeros(0, jnp.float32)
    if M == 1:
        return None, jnp.ones(1, jnp.float32)
    return jnp.arange(M, dtype=jnp.float32) * np.float32(2 * np.pi / (M - 1)), None


def hanning(M: int):
    t, degenerate = _points(M)
    return degenerate if t is None else 0.5 - 0.5 * _cos(t)


def hamming(M: int):
    t, degenerate = _points(M)
    return degenerate if t is None else 0.54 - 0.46 * _cos(t)


def blackman(M: int):
    t, degenerate = _points(M)
    return degenerate if t is None else 0.42 - 0.5 * _cos(t) + 0.08 * _cos(2 * t)


def bartlett(M: int):
    from meshsim._src.numpy import namespace as jnp
    t, degenerate = _points(M)
    if t is None:
        return degenerate
    n = jnp.arange(1 - int(M), int(M), 2, dtype=jnp.float32)
    return 1 - jnp.abs(n / np.float32(int(M) - 1))


def _cos(x):
    from meshsim._src.numpy import namespace as jnp
    return jnp.cos(x)


def i0(x):
    """The modified Bessel function of order 0 (as jnp.i0)."""
    from meshsim._src.scipy.special_series import i0 as bessel_i0
    return bessel_i0(x)


def kaiser(M: int, beta):
    """The Kaiser window: I0(beta sqrt(1 - (2n/(M-1) - 1)^2)) / I0(beta)."""
    from meshsim._src.numpy import namespace as jnp
    t, degenerate = _points(M)
    if t is None:
        return degenerate
    n = jnp.arange(0, int(M), dtype=jnp.float32)
    alpha = (int(M) - 1) / 2.0
    return i0(beta * jnp.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(jnp.float32(beta))
