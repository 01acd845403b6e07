"""jax.random's poisson, binomial, multinomial, generalized_normal and ball
against real JAX: the same key gives the same draws (counts exactly, floats
to rounding), over small and large rates/counts and edge parameters."""
import numpy as np
import pytest

import meshsim
from outcomes import outcome

jax = pytest.importorskip("jax")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("lam", [0.5, 3.0, 25.0, "mixed"])
def test_poisson_is_bit_identical_to_jax(seed, lam):
    lam = np.array([0., 1., 9.9, 10., 40., np.nan], np.float32) if lam == "mixed" else lam
    shape = None if np.ndim(lam) else (6,)
    a = jax.random.poisson(jax.random.key(seed), lam, shape)
    b = meshsim.random.poisson(meshsim.random.key(seed), lam, shape)
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n,p", [(10., 0.3), (100., 0.7), (np.array([5., 50., 1000.], np.float32), 0.45),
                                 (np.array([-1., np.inf, 20.], np.float32), 0.5), (20., np.float32(np.nan))])
def test_binomial_is_bit_identical_to_jax(seed, n, p):
    a = jax.random.binomial(jax.random.key(seed), n, p, (3,))
    b = meshsim.random.binomial(meshsim.random.key(seed), n, p, (3,))
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


@pytest.mark.parametrize("seed", range(3))
def test_multinomial_is_bit_identical_to_jax(seed):
    p = np.array([[0.2, 0.3, 0.5], [0.0, 1.0, 0.0]], np.float32)
    a = jax.random.multinomial(jax.random.key(seed), np.array([20., 7.], np.float32), p)
    b = meshsim.random.multinomial(meshsim.random.key(seed), np.array([20., 7.], np.float32), p)
    np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.5])
def test_generalized_normal_and_ball_match_jax(p):
    k, mk = jax.random.key(4), meshsim.random.key(4)
    np.testing.assert_allclose(np.asarray(meshsim.random.generalized_normal(mk, p, (5,))),
                               np.asarray(jax.random.generalized_normal(k, p, (5,))), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(meshsim.random.ball(mk, 3, p, (2,))),
                               np.asarray(jax.random.ball(k, 3, p, (2,))), rtol=2e-6, atol=1e-7)


ERRORS = {
    "poisson_dtype": lambda lib: lib.random.poisson(lib.random.key(0), 3., dtype=np.float32),
    "binomial_dtype": lambda lib: lib.random.binomial(lib.random.key(0), 10, 0.3, dtype=np.int32),
    "multinomial_list": lambda lib: lib.random.multinomial(lib.random.key(0), 10., [0.2, 0.8]),
    "generalized_normal_dtype": lambda lib: lib.random.generalized_normal(lib.random.key(0), 2., (2,),
                                                                          dtype=np.int32),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_jax(case):
    expected = outcome(ERRORS[case], jax)
    assert expected[0] != "ok" and outcome(ERRORS[case], meshsim) == expected
