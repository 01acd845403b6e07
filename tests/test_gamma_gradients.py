"""Gradients in the gamma family's shape parameter against real JAX: lax.igamma_grad_a and
lax.random_gamma_grad over random shapes and draws (and their domain edges), and the
implicit-reparameterization gradients of random.gamma/loggamma/beta/dirichlet/chisquare/t
under grad, jit and vmap."""
import zlib

import numpy as np
import pytest

import meshsim
import meshsim.random as mrandom
from meshsim import lax as mlax
from meshsim.scipy import special as mspecial

jax = pytest.importorskip("jax")


def seeded(name: str):
    return np.random.default_rng(zlib.crc32(name.encode()))


def close(got, expected, rtol):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-30)


@pytest.mark.parametrize("name", ["igamma_grad_a", "random_gamma_grad"])
@pytest.mark.parametrize("log_a_range,rtol", [((-3.0, 3.0), 1e-4), ((3.0, 6.0), 3e-3)], ids=["moderate", "large"])
def test_shape_derivatives_at_draws(name, log_a_range, rtol):
    rng = seeded(f"{name}-{log_a_range}")
    a = np.exp(rng.uniform(*log_a_range, 500)).astype(np.float32)
    x = np.asarray(jax.random.gamma(jax.random.key(int(rng.integers(1 << 30))), a))
    if log_a_range[1] <= 3.0:  # also off the draws (far tails of large shapes need XLA's 2000 terms)
        x = np.concatenate([x, (a * rng.uniform(0.05, 3.0, a.shape)).astype(np.float32)])
        a = np.concatenate([a, a])
    close(getattr(mlax, name)(a, x), getattr(jax.lax, name)(a, x), rtol)


@pytest.mark.parametrize("name", ["igamma_grad_a", "random_gamma_grad"])
def test_domain_edges(name):
    a = np.array([1.0, 0.0, -1.0, 2.0, np.nan, 1.5, 3.0], np.float32)
    x = np.array([0.0, 1.0, 1.0, -1.0, 1.0, np.nan, 2.0], np.float32)
    np.testing.assert_array_equal(np.isnan(np.asarray(getattr(mlax, name)(a, x))),
                                  np.isnan(np.asarray(getattr(jax.lax, name)(a, x))))
    close(getattr(mlax, name)(a[[0, 6]], x[[0, 6]]), getattr(jax.lax, name)(a[[0, 6]], x[[0, 6]]), 1e-5)


def test_broadcasting_and_gammainc_gradient():
    a = np.array([[0.5], [2.0], [7.5]], np.float32)
    x = np.array([0.3, 1.0, 4.0, 9.0], np.float32)
    ab, xb = np.broadcast_arrays(a, x)
    close(mlax.igamma_grad_a(ab, xb), jax.lax.igamma_grad_a(ab, xb), 1e-4)
    close(meshsim.grad(lambda v: mspecial.gammainc(v, x).sum())(a),
          jax.grad(lambda v: jax.scipy.special.gammainc(v, x).sum())(a), 1e-4)
    close(meshsim.grad(lambda v: mspecial.gammaincc(v, x).sum())(a),
          jax.grad(lambda v: jax.scipy.special.gammaincc(v, x).sum())(a), 1e-4)


def _samplers(mod):
    weights = np.arange(1, 7, dtype=np.float32)
    return {
        "gamma": lambda k, a: mod.gamma(k, a),
        "loggamma": lambda k, a: mod.loggamma(k, a),
        "gamma_shaped": lambda k, a: mod.gamma(k, a, (3, 6)),
        "beta": lambda k, a: mod.beta(k, a, 2.0),
        "dirichlet": lambda k, a: mod.dirichlet(k, a) * weights,
        "chisquare": lambda k, a: mod.chisquare(k, 2 * a),
        "t": lambda k, a: mod.t(k, 2 * a + 1),
    }


@pytest.mark.parametrize("sampler", list(_samplers(mrandom)))
@pytest.mark.parametrize("seed", [0, 7, 123])
def test_sampler_gradients_in_shape(sampler, seed):
    rng = seeded(f"{sampler}-{seed}")
    a = np.exp(rng.uniform(-2.5, 2.5, 6)).astype(np.float32)
    mine, theirs = _samplers(mrandom)[sampler], _samplers(jax.random)[sampler]
    loss_m = lambda v: mine(mrandom.key(seed), v).sum()  # noqa: E731
    loss_j = lambda v: theirs(jax.random.key(seed), v).sum()  # noqa: E731
    close(meshsim.grad(loss_m)(a), jax.grad(loss_j)(a), 2e-4)
    close(meshsim.jit(meshsim.grad(loss_m))(a), jax.jit(jax.grad(loss_j))(a), 2e-4)


def test_gradient_under_vmap_over_keys():
    a = np.array([0.4, 1.7, 6.0], np.float32)
    seeds = np.arange(4)
    got = meshsim.vmap(lambda s: meshsim.grad(lambda v: mrandom.gamma(mrandom.key(s), v).sum())(a))(seeds)
    expected = jax.vmap(lambda s: jax.grad(lambda v: jax.random.gamma(jax.random.key(s), v).sum())(a))(seeds)
    close(got, expected, 2e-4)


@pytest.mark.parametrize("sampler", ["gamma"])  # each costs JAX ~25 s to compile
def test_second_derivatives_in_shape(sampler):
    """The shape derivative is itself differentiated (JAX's random_gamma JVP rule): hessian
    and forward mode of the gradient."""
    rng = seeded(f"second-{sampler}")
    a = np.exp(rng.uniform(-1.5, 2.0, 6)).astype(np.float32)
    mine, theirs = _samplers(mrandom)[sampler], _samplers(jax.random)[sampler]
    loss_m = lambda v: (mine(mrandom.key(3), v) ** 2).sum()  # noqa: E731
    loss_j = lambda v: (theirs(jax.random.key(3), v) ** 2).sum()  # noqa: E731
    np.testing.assert_allclose(meshsim.hessian(loss_m)(a), jax.jit(jax.hessian(loss_j))(a), rtol=2e-3, atol=1e-5)
    np.testing.assert_allclose(meshsim.jvp(meshsim.grad(loss_m), (a,), (a[::-1],))[1],
                               jax.jit(lambda v, t: jax.jvp(jax.grad(loss_j), (v,), (t,))[1])(a, a[::-1]),
                               rtol=2e-3, atol=1e-5)
