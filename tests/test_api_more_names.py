"""More of JAX 0.10.2's public names, each against JAX: jax.random.multivariate_normal and
orthogonal (bit-for-bit samples up to linear-algebra rounding), nn.initializers.orthogonal,
jnp.polyfit/polydiv/einsum_path/save/load, scipy.integrate.trapezoid, scipy.linalg
fiedler_companion/invpascal, closure_convert, custom_derivatives.linear_call/zero_from_primal,
multihost_utils for one process, the host_* aliases, numpy_dtype_promotion, and
jax.dtypes.prng_key/extended with issubdtype."""
import importlib
import os
import warnings

import numpy as np
import pytest

import meshsim
from tree_oracle import assert_trees_close

X = np.linspace(0, 1, 20).astype(np.float32)
Y = (3 * X ** 2 - X + 0.5).astype(np.float32)


def _mod(jax, name):
    return importlib.import_module(jax.__name__ + "." + name)


CASES = {
    "mvn": lambda jax: jax.random.multivariate_normal(jax.random.key(3), np.float32([1, 2, 3]),
                                                      np.eye(3, dtype=np.float32) + 0.5, (4,)),
    "mvn_eigh_svd": lambda jax: [jax.random.multivariate_normal(
        jax.random.key(1), np.zeros(2, np.float32), np.float32([[2, .3], [.3, 1]]), method=m)
        for m in ("eigh", "svd")],
    "orthogonal": lambda jax: (jax.random.orthogonal(jax.random.key(3), 4),
                               jax.random.orthogonal(jax.random.key(4), 3, (2,), m=5),
                               jax.random.orthogonal(jax.random.key(5), 5, m=2)),
    "init_orthogonal": lambda jax: (jax.nn.initializers.orthogonal(2.0)(jax.random.key(3), (6, 4)),
                                    jax.nn.initializers.orthogonal(column_axis=0)(jax.random.key(3), (3, 2, 5))),
    "polyfit": lambda jax: (jax.numpy.polyfit(X, Y, 2),
                            jax.numpy.polyfit(X, np.stack([Y, 2 * Y], 1), 1, w=np.linspace(1, 2, 20).astype(np.float32))),
    "polydiv": lambda jax: jax.numpy.polydiv(np.float32([1, -3, 2, 5]), np.float32([2, 1])),
    "einsum_path": lambda jax: np.array(jax.numpy.einsum_path(
        "ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 40)), np.ones((40, 5)))[0]),
    "trapezoid": lambda jax: (_mod(jax, "scipy.integrate").trapezoid(Y, X),
                              _mod(jax, "scipy.integrate").trapezoid(Y, dx=0.5)),
    "fiedler_companion": lambda jax: [_mod(jax, "scipy.linalg").fiedler_companion(np.float32(a))
                                      for a in ([1, 2, 3, 4, 5], [2, 3, 4, 5], [3, 1])],
    "invpascal": lambda jax: [_mod(jax, "scipy.linalg").invpascal(5, k) for k in ("symmetric", "lower", "upper")],
    "closure_convert": lambda jax: jax.grad(
        lambda a: (lambda f, c: f(2.0, *c))(*jax.closure_convert(lambda t: t * a ** 2, 1.0)))(3.0),
    "linear_call": lambda jax: jax.grad(lambda v: jax.numpy.sum(jax.custom_derivatives.linear_call(
        lambda r, v: r * v, lambda r, ct: r * ct, 3.0, v) ** 2))(jax.numpy.arange(3.0)),
    "zero_from_primal": lambda jax: jax.custom_derivatives.zero_from_primal({"a": jax.numpy.ones(2)})["a"],
    "init_delta_orthogonal": lambda jax: [
        jax.nn.initializers.delta_orthogonal(scale)(jax.random.key(seed), shape, dtype)
        for scale, seed, shape, dtype in ((1.0, 0, (3, 4, 4), np.float32),
                                          (0.5, 1, (2, 3, 3, 5), np.float32),
                                          (2.0, 2, (3, 1, 4, 2, 6), np.float32))],
}


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 4)])
def test_delta_orthogonal_refuses_what_jax_refuses(real_jax, shape):
    errors = []
    for jax in (meshsim, real_jax):
        with pytest.raises(ValueError) as e:
            jax.nn.initializers.delta_orthogonal()(jax.random.key(0), shape)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(real_jax, name):
    ours, theirs = CASES[name](meshsim), CASES[name](real_jax)
    assert_trees_close(ours, theirs, rtol=1e-4, atol=1e-5)


def test_save_and_load_round_trip(real_jax, tmp_path):
    for jax in (meshsim, real_jax):
        path = os.path.join(tmp_path, f"{jax.__name__}.npy")
        jax.numpy.save(path, jax.numpy.arange(5.0))
        loaded = jax.numpy.load(path)
        assert isinstance(loaded, jax.Array)
        np.testing.assert_array_equal(np.asarray(loaded), np.arange(5.0, dtype=np.float32))


def test_one_process_multihost_and_host_aliases(real_jax):
    for jax in (meshsim, real_jax):
        mu = _mod(jax, "experimental.multihost_utils")
        assert mu.reached_preemption_sync_point(0) is False
        assert issubclass(mu.ProcessFailureError, Exception)
        with pytest.raises(RuntimeError, match="Distributed JAX not initialized"):
            with mu.live_devices(jax.devices()):
                pass
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert (jax.host_count(), jax.host_id(), jax.host_ids()) == (1, 0, [0])
        assert len(seen) == 3 and "has been renamed" in str(seen[0].message)


def test_numpy_dtype_promotion_context(real_jax):
    for jax in (meshsim, real_jax):
        jnp = jax.numpy
        with jax.numpy_dtype_promotion("strict"):
            with pytest.raises(jax.errors.JaxTypeError if hasattr(jax.errors, "JaxTypeError")
                               else jax.dtypes.TypePromotionError):
                jnp.ones(2, jnp.float32) + jnp.ones(2, jnp.int32)
        assert (jnp.ones(2, jnp.float32) + jnp.ones(2, jnp.int32)).dtype == jnp.float32


def test_prng_key_dtypes(real_jax):
    for jax in (meshsim, real_jax):
        jnp = jax.numpy
        k = jax.random.key(0)
        assert jnp.issubdtype(k.dtype, jax.dtypes.prng_key)
        assert jnp.issubdtype(k.dtype, jax.dtypes.extended)
        assert not jnp.issubdtype(k.dtype, jnp.floating)
        assert not jnp.issubdtype(np.float32, jax.dtypes.prng_key)
        assert jnp.issubdtype(jax.dtypes.prng_key, jax.dtypes.extended)
        assert jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key)
