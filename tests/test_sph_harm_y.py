"""jax.scipy.special.sph_harm_y against JAX: random degrees, orders (negative too), polar and
azimuthal angles, scalar angles, float32/float64, under jit with a static n_max, gradients of
the real and imaginary parts, and JAX's errors."""
import numpy as np
import pytest

import meshsim
import meshsim.scipy.special as ours

jax = pytest.importorskip("jax")
theirs = pytest.importorskip("jax.scipy.special")


def _case(rng, k):
    n = rng.integers(0, 9, k)
    m = np.array([rng.integers(-d, d + 1) for d in n])
    theta = rng.uniform(0, np.pi, k).astype(np.float32)
    phi = rng.uniform(0, 2 * np.pi, k).astype(np.float32)
    return n, m, theta, phi


@pytest.mark.parametrize("seed", range(10))
def test_values_match_jax(seed):
    rng = np.random.default_rng(seed)
    n, m, theta, phi = _case(rng, int(rng.integers(1, 12)))
    got = np.asarray(ours.sph_harm_y(n, m, theta, phi))
    want = np.asarray(theirs.sph_harm_y(n, m, theta, phi))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_float64_scalar_angle_and_jit_match_jax():
    rng = np.random.default_rng(3)
    n, m, _, phi = _case(rng, 6)
    with meshsim.enable_x64(True), jax.enable_x64(True):
        got = ours.sph_harm_y(n, m, 0.7, phi.astype(np.float64))
        want = theirs.sph_harm_y(n, m, 0.7, phi.astype(np.float64))
        assert np.asarray(got).dtype == np.asarray(want).dtype == np.complex128
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-14)
    n, m, theta, phi = _case(rng, 5)
    got = meshsim.jit(lambda a, b, t, p: ours.sph_harm_y(a, b, t, p, n_max=8))(n, m, theta, phi)
    want = jax.jit(lambda a, b, t, p: theirs.sph_harm_y(a, b, t, p, n_max=8))(n, m, theta, phi)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6)


def test_gradients_match_jax():
    rng = np.random.default_rng(5)
    n, m, theta, phi = _case(rng, 4)

    def loss(special):
        return lambda t, p: (special.sph_harm_y(n, m, t, p, n_max=8).real ** 2
                             + 3 * special.sph_harm_y(n, m, t, p, n_max=8).imag).sum()

    for got, want in zip(meshsim.grad(loss(ours), argnums=(0, 1))(theta, phi),
                         jax.grad(loss(theirs), argnums=(0, 1))(theta, phi)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)


def test_errors_match_jax():
    n, m = np.array([1, 2]), np.array([0, 1])
    for call in (lambda s: s.sph_harm_y(n, m, 0.5, 0.1, diff_n=1),):
        with pytest.raises(NotImplementedError) as got:
            call(ours)
        with pytest.raises(NotImplementedError) as want:
            call(theirs)
        assert str(got.value) == str(want.value)
    with pytest.raises(TypeError, match="n_max"):
        meshsim.jit(lambda a: ours.sph_harm_y(a, m, 0.5, 0.1))(n)
    with pytest.raises(TypeError, match="n_max"):
        jax.jit(lambda a: theirs.sph_harm_y(a, m, 0.5, 0.1))(n)
