"""meshsim.numpy.linalg's norms and matrix functions against jax.numpy.linalg:
every ord and axis form, keepdims, dtypes, and JAX's errors."""
import numpy as np
import pytest

import meshsim.numpy as jnp

F32, I32 = np.float32, np.int32


@pytest.fixture(scope="module")
def JL(real_jax):
    import jax.numpy
    return jax.numpy.linalg


def assert_same(ours, theirs, rtol=1e-5, atol=1e-5):
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert ours.weak_type == theirs.weak_type
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=atol)


def test_norms_match_jax(JL):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 5)).astype(F32)
    v = rng.normal(size=7).astype(F32)
    cases = [((v,), {}), ((x,), {}), ((x,), dict(keepdims=True)), ((I32([3, -4]),), {})]
    for ord_ in (None, 1, 2, 3, 0.5, 0, np.inf, -np.inf, -1):
        cases += [((v,), dict(ord=ord_)), ((x,), dict(ord=ord_, axis=1, keepdims=True)), ((x,), dict(ord=ord_, axis=-1))]
    for ord_ in (None, "fro", 1, -1, np.inf, -np.inf):
        for axis in ((0, 1), (2, 0), (-1, -2)):
            for keepdims in (False, True):
                cases.append(((x,), dict(ord=ord_, axis=axis, keepdims=keepdims)))
        cases.append(((x[0],), dict(ord=ord_)))
    for args, kwargs in cases:
        assert_same(jnp.linalg.norm(*args, **kwargs), JL.norm(*args, **kwargs))
    for ord_ in ("fro", 1, np.inf):
        assert_same(jnp.linalg.matrix_norm(x, ord=ord_), JL.matrix_norm(x, ord=ord_))
    for kwargs in [{}, dict(axis=1), dict(axis=(0, 2), ord=1), dict(ord=np.inf, keepdims=True), dict(ord=3, axis=-1)]:
        assert_same(jnp.linalg.vector_norm(x, **kwargs), JL.vector_norm(x, **kwargs))


def test_matrix_functions_match_jax(JL):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 4, 4)).astype(F32)
    v = rng.normal(size=(2, 4, 3)).astype(F32)
    assert_same(jnp.linalg.outer(v[0, 0], a[0, 0]), JL.outer(v[0, 0], a[0, 0]))
    assert_same(jnp.linalg.matmul(a, v), JL.matmul(a, v))
    assert_same(jnp.linalg.tensordot(a, v, axes=((1,), (1,))), JL.tensordot(a, v, axes=((1,), (1,))))
    assert_same(jnp.linalg.trace(a, offset=1), JL.trace(a, offset=1))
    assert_same(jnp.linalg.diagonal(a, offset=-1), JL.diagonal(a, offset=-1))
    assert_same(jnp.linalg.matrix_transpose(v), JL.matrix_transpose(v))
    assert_same(jnp.linalg.vecdot(v, v, axis=1), JL.vecdot(v, v, axis=1))
    assert_same(jnp.linalg.cross(v, v[::-1]), JL.cross(v, v[::-1]))
    for n in range(0, 7):
        assert_same(jnp.linalg.matrix_power(a, n), JL.matrix_power(a, n), rtol=1e-4, atol=1e-3)
    assert_same(jnp.linalg.matrix_power(I32([[1, 1], [1, 0]]), 10), JL.matrix_power(I32([[1, 1], [1, 0]]), 10))


def test_errors_match_jax(JL):
    x = np.ones((2, 3, 4), F32)
    for mod in (jnp.linalg, JL):
        with pytest.raises(ValueError, match="Improper number of axes for norm"):
            mod.norm(x, ord=1)
        with pytest.raises(ValueError, match="Invalid order 'x' for matrix norm."):
            mod.norm(x[0], ord="x")
        with pytest.raises(ValueError, match="Invalid order 'inf' for vector norm.Use 'jax.numpy.inf' instead."):
            mod.vector_norm(x, ord="inf")
        with pytest.raises(ValueError, match="Input arrays must be one-dimensional"):
            mod.outer(x, x)
        with pytest.raises(ValueError, match="Both input arrays must be"):
            mod.cross(x, x)
        with pytest.raises(ValueError, match="matrix_transpose requires at least 2 dimensions; got ndim=1"):
            mod.matrix_transpose(x[0, 0])
        with pytest.raises(TypeError, match="Last 2 dimensions of the array must be square"):
            mod.matrix_power(x, 2)
        with pytest.raises(TypeError, match="exponent must be an integer, got 1.5"):
            mod.matrix_power(x[:, :3, :3], 1.5)
