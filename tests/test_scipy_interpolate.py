"""jax.scipy.interpolate.RegularGridInterpolator against JAX 0.10.2: linear and nearest on a
non-uniform 2-D grid, points outside it (NaN, a fill value, or extrapolated), trailing value
dimensions, batch shapes of the query points, a per-call method and jit."""
import importlib

import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(0)
G1, G2 = np.float32([0, 1, 2.5, 4]), np.float32([-1, 0, 1, 3, 4])
VALS = RNG.normal(size=(4, 5)).astype(np.float32)
VALS3 = RNG.normal(size=(4, 5, 2)).astype(np.float32)
XI = np.stack([RNG.uniform(-0.5, 4.5, 30), RNG.uniform(-1.5, 4.5, 30)], -1).astype(np.float32)

CASES = {
    "linear": lambda ip, jax: ip.RegularGridInterpolator((G1, G2), VALS)(XI),
    "nearest": lambda ip, jax: ip.RegularGridInterpolator((G1, G2), VALS, method="nearest")(XI),
    "extrapolate": lambda ip, jax: ip.RegularGridInterpolator((G1, G2), VALS, fill_value=None)(XI),
    "fill_and_trailing_dims": lambda ip, jax: ip.RegularGridInterpolator((G1, G2), VALS3, fill_value=-7.0)(
        XI.reshape(5, 6, 2)),
    "method_per_call": lambda ip, jax: ip.RegularGridInterpolator((G1, G2), VALS)(XI, method="nearest"),
    "jit": lambda ip, jax: jax.jit(lambda x: ip.RegularGridInterpolator((G1, G2), VALS)(x))(XI),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(real_jax, name):
    outs = [CASES[name](importlib.import_module(jax.__name__ + ".scipy.interpolate"), jax)
            for jax in (meshsim, real_jax)]
    a, b = (np.asarray(o) for o in outs)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_errors():
    ip = importlib.import_module("meshsim.scipy.interpolate")
    with pytest.raises(NotImplementedError, match="bounds_error"):
        ip.RegularGridInterpolator((G1, G2), VALS, bounds_error=True)
    with pytest.raises(ValueError, match="method 'cubic' is not defined"):
        ip.RegularGridInterpolator((G1, G2), VALS, method="cubic")
