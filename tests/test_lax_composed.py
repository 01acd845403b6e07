"""jax.lax operations composed of others — generic reduce and reduce_window,
associative_scan, approx_max_k/approx_min_k, composite, padtype_to_pads,
dtype, lgamma/digamma — against real JAX: values, dtypes, gradients, errors."""
import numpy as np
import pytest

import meshsim
import meshsim.lax as mlax
from tree_oracle import assert_trees_close

RNG = np.random.default_rng(5)
X = np.array([3., 1., 4., 1., 5., 9., 2., 6.], np.float32)
M = np.arange(16., dtype=np.float32).reshape(4, 4)
R = RNG.normal(size=(3, 7, 5)).astype(np.float32)
I = RNG.integers(-5, 5, size=(6, 4)).astype(np.int32)


def _run(lax, jnp, build):
    try:
        return build(lax, jnp)
    except Exception as e:  # noqa: BLE001 (compared with JAX's)
        return (type(e).__name__, str(e).splitlines()[0])


CASES = {
    "approx_max_k": lambda lax, jnp: lax.approx_max_k(X, 3),
    "approx_min_k": lambda lax, jnp: lax.approx_min_k(X, 3),
    "approx_max_k_dim0": lambda lax, jnp: lax.approx_max_k(R, 2, reduction_dimension=1),
    "approx_min_k_int": lambda lax, jnp: lax.approx_min_k(I, 2, reduction_dimension=0),
    "scan_add": lambda lax, jnp: lax.associative_scan(jnp.add, jnp.arange(7.)),
    "scan_mul_rev": lambda lax, jnp: lax.associative_scan(lambda a, b: a * b, jnp.arange(1., 6.),
                                                          reverse=True),
    "scan_axis1": lambda lax, jnp: lax.associative_scan(jnp.maximum, R, axis=1),
    "scan_pytree": lambda lax, jnp: lax.associative_scan(
        lambda a, b: (a[0] + b[0], a[1] * b[1]), (jnp.arange(6.), jnp.arange(1., 7.))),
    "scan_affine": lambda lax, jnp: lax.associative_scan(
        lambda a, b: (a[0] * b[0], a[1] * b[0] + b[1]), (R[0, :, 0] * 0 + 0.5, R[0, :, 1])),
    "reduce_add": lambda lax, jnp: lax.reduce(M, 0., lax.add, (1,)),
    "reduce_max": lambda lax, jnp: lax.reduce(M, -np.inf, lax.max, (0,)),
    "reduce_int_max": lambda lax, jnp: lax.reduce(I, np.int32(np.iinfo(np.int32).min), lax.max, (0, 1)),
    "reduce_custom": lambda lax, jnp: lax.reduce(R, 1.0, lambda a, b: a + b * b, (0, 2)),
    "reduce_pytree": lambda lax, jnp: lax.reduce((M, M * 2), (0., 1.),
                                                 lambda a, b: (a[0] + b[0], a[1] * b[1] / 8), (0,)),
    "rw_max_valid": lambda lax, jnp: lax.reduce_window(M, -np.inf, lax.max, (2, 2), (2, 2), "VALID"),
    "rw_add_same": lambda lax, jnp: lax.reduce_window(M, 0., lax.add, (3, 3), (1, 1), "SAME"),
    "rw_add_pads": lambda lax, jnp: lax.reduce_window(R, 0., lax.add, (1, 3, 2), (1, 2, 1),
                                                      ((0, 0), (1, 2), (0, 1))),
    "rw_min_dilated": lambda lax, jnp: lax.reduce_window(R, np.inf, lax.min, (1, 2, 2), (1, 1, 1),
                                                         "VALID", window_dilation=(1, 2, 1)),
    "rw_base_dilation": lambda lax, jnp: lax.reduce_window(M, 0., lax.add, (2, 2), (1, 1), "VALID",
                                                           base_dilation=(2, 1)),
    "rw_same_lower": lambda lax, jnp: lax.reduce_window(M, 0., lax.add, (2, 2), (1, 1), "SAME_LOWER"),
    "rw_init_nonidentity": lambda lax, jnp: lax.reduce_window(M, 1., lax.add, (2, 2), (2, 2), "VALID"),
    "pads_same": lambda lax, jnp: np.asarray(lax.padtype_to_pads((5, 6), (3, 3), (1, 2), "SAME")),
    "pads_valid": lambda lax, jnp: np.asarray(lax.padtype_to_pads((5, 6), (3, 3), (1, 2), "VALID")),
    "pads_lower": lambda lax, jnp: np.asarray(lax.padtype_to_pads((5, 6), (4, 3), (1, 2), "SAME_LOWER")),
    "composite": lambda lax, jnp: lax.composite(lambda x: x * 2, "my.double")(jnp.ones(2)),
    "lgamma": lambda lax, jnp: lax.lgamma(np.abs(R) + 0.1),
    "digamma": lambda lax, jnp: lax.digamma(np.abs(R) + 0.1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(real_jax, name):
    ours = _run(mlax, meshsim.numpy, CASES[name])
    theirs = _run(real_jax.lax, real_jax.numpy, CASES[name])
    if isinstance(theirs, tuple) and isinstance(theirs[0], str):
        assert ours == theirs
        return
    assert_trees_close(ours, theirs, rtol=2e-5, atol=1e-5)


def test_dtype_matches_jax(real_jax):
    for x in (1.0, 1, True, np.ones(2, np.int8), np.float64(2.0), meshsim.numpy.ones(2)):
        assert mlax.dtype(x) == real_jax.lax.dtype(np.asarray(x) if hasattr(x, "shape") else x)


def test_reduce_window_and_scan_gradients_match_jax(real_jax):
    def pool(lax, x):
        return lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2), (1, 2, 1), "VALID").sum()

    def cumsum(lax, x):
        return (lax.associative_scan(lambda a, b: a + b, x, axis=1) ** 2).sum()
    for f in (pool, cumsum):
        ours = meshsim.grad(lambda x: f(mlax, x))(R)
        theirs = real_jax.grad(lambda x: f(real_jax.lax, x))(R)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_reduce_and_reduce_window_under_jit(real_jax):
    f = meshsim.jit(lambda x: mlax.reduce_window(x, 0., mlax.add, (2, 2), (1, 1), "SAME"))
    g = real_jax.jit(lambda x: real_jax.lax.reduce_window(x, 0., real_jax.lax.add, (2, 2), (1, 1), "SAME"))
    np.testing.assert_allclose(np.asarray(f(M)), np.asarray(g(M)))
    h = meshsim.jit(lambda x: mlax.reduce(x, 1.0, lambda a, b: a * b + 1, (0,)))
    k = real_jax.jit(lambda x: real_jax.lax.reduce(x, 1.0, lambda a, b: a * b + 1, (0,)))
    np.testing.assert_allclose(np.asarray(h(M / 16)), np.asarray(k(M / 16)), rtol=1e-6)
