"""jax.random's gamma family (gamma, loggamma, beta, dirichlet, chisquare,
t, f) against real JAX for the same keys: the same draws to a few ulps
(JAX's key splits and Marsaglia-Tsang rejection loop), distribution
moments, jit, dtypes and errors."""
import numpy as np
import pytest

import meshsim
from x64_mode import x64

jax = pytest.importorskip("jax")

CASES = {
    "gamma_small": lambda r, k: r.gamma(k, 0.3, (7,)),
    "gamma_mixed": lambda r, k: r.gamma(k, np.array([[0.5, 3.0, 10.0], [1.5, 0.1, 7.0]], np.float32)),
    "gamma_broadcast": lambda r, k: r.gamma(k, np.array([0.7, 4.0], np.float32), (3, 2)),
    "loggamma": lambda r, k: r.loggamma(k, np.array([0.01, 0.5, 2.0, 30.0], np.float32)),
    "beta": lambda r, k: r.beta(k, 0.5, np.array([0.2, 1.0, 5.0], np.float32), (2, 3)),
    "dirichlet": lambda r, k: r.dirichlet(k, np.array([0.3, 1.0, 4.0], np.float32), (4,)),
    "chisquare": lambda r, k: r.chisquare(k, np.array([1.0, 3.0, 9.0], np.float32)),
    "t": lambda r, k: r.t(k, 3.0, (6,)),
    "f": lambda r, k: r.f(k, 2.0, 9.0, (3, 2)),
    "f_arrays": lambda r, k: r.f(k, np.array([2.0, 5.0], np.float32), np.array([4.0, 9.0], np.float32)),
}


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("case", sorted(CASES))
def test_draws_match_jax(case, seed):
    ours = np.asarray(CASES[case](meshsim.random, meshsim.random.key(seed)))
    theirs = np.asarray(CASES[case](jax.random, jax.random.key(seed)))
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=3e-6, atol=1e-30)


def test_legacy_keys_and_jit_match_jax():
    f = lambda lib: lib.jit(lambda k: lib.random.gamma(k, 2.5, (4,)))  # noqa: E731
    np.testing.assert_allclose(np.asarray(f(meshsim)(meshsim.random.PRNGKey(3))),
                               np.asarray(f(jax)(jax.random.PRNGKey(3))), rtol=3e-6)


def test_float64_draws_match_jax():
    with x64(meshsim, jax):
        ours = np.asarray(meshsim.random.gamma(meshsim.random.key(1), 0.8, (5,), dtype=np.float64))
        theirs = np.asarray(jax.random.gamma(jax.random.key(1), 0.8, (5,), dtype=np.float64))
        assert ours.dtype == np.float64
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_moments():
    a = 2.5
    x = np.asarray(meshsim.random.gamma(meshsim.random.key(11), a, (4000,)), np.float64)
    assert abs(x.mean() - a) < 0.15 and abs(x.var() - a) < 0.4
    d = np.asarray(meshsim.random.dirichlet(meshsim.random.key(12), np.array([1.0, 2.0, 3.0]), (500,)))
    np.testing.assert_allclose(d.sum(-1), 1, rtol=1e-5)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.03)


ERRORS = {
    "int_dtype": lambda r, k: r.gamma(k, 1.0, (2,), dtype=np.int32),
    "shape": lambda r, k: r.gamma(k, np.ones(3, np.float32), (2,)),
    "dirichlet_rank": lambda r, k: r.dirichlet(k, 1.0),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_jax(case):
    def outcome(lib):
        try:
            ERRORS[case](lib.random, lib.random.key(0))
        except Exception as e:  # noqa: BLE001 - compared below
            return type(e).__name__
        return None

    assert outcome(jax) is not None and outcome(meshsim) == outcome(jax)
