"""sort / argsort / lexsort / top_k / searchsorted / unique vs NumPy and JAX."""
import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax

DTYPES = [np.float32, np.int32, np.int8, np.uint8, np.bool_]


def rand(shape, dtype, rng, low=-5, high=5):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(low, high, size=shape).astype(dtype)  # small range: many ties


def check(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(20))
def test_sort_and_stable_argsort_match_numpy(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(0, 6, size=rng.integers(1, 4)))
    x = rand(shape, DTYPES[seed % len(DTYPES)], rng)
    axis = None if seed % 5 == 0 else int(rng.integers(-len(shape), len(shape)))
    check(jnp.sort(x, axis=axis), np.sort(x, axis=axis, kind="stable"))
    check(jnp.argsort(x, axis=axis), np.argsort(x, axis=axis, kind="stable").astype(np.int32))
    check(jnp.asarray(x).sort(axis=axis), np.sort(x, axis=axis))


def test_descending_and_nan_order_like_jax(real_jax):
    rjnp = real_jax.numpy
    x = np.array([[1.0, np.nan, 1.0, 0.0, -0.0, 2.0, -np.inf, np.nan],
                  [3.0, -1.0, np.inf, -0.0, 0.0, 3.0, -np.nan, 1.0]], np.float32)
    for kw in ({}, {"descending": True}, {"axis": 0}, {"axis": None, "descending": True}):
        got, want = jnp.sort(x, **kw), np.asarray(rjnp.sort(x, **kw))
        np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(want))  # -0.0 order
        check(got, want)
        check(jnp.argsort(x, **kw), np.asarray(rjnp.argsort(x, **kw)))
    ints = np.array([3, 1, 3, 2, 1], np.int32)
    check(jnp.argsort(ints, descending=True), np.asarray(rjnp.argsort(ints, descending=True)))


def test_lax_sort_multi_operand():
    rng = np.random.default_rng(5)
    k1, k2 = rand((4, 9), np.int32, rng, 0, 3), rand((4, 9), np.float32, rng, 0, 3)
    v = rng.standard_normal((4, 9)).astype(np.float32)
    s1, s2, sv = lax.sort((k1, k2, v), dimension=1, num_keys=2)
    order = np.stack([np.lexsort((k2[i], k1[i])) for i in range(4)])
    check(s1, np.take_along_axis(k1, order, 1))
    check(s2, np.take_along_axis(k2, order, 1))
    check(sv, np.take_along_axis(v, order, 1))
    keys, vals = lax.sort_key_val(k1, v, dimension=0)
    order = np.argsort(k1, axis=0, kind="stable")
    check(keys, np.take_along_axis(k1, order, 0))
    check(vals, np.take_along_axis(v, order, 0))
    check(lax.sort(v[0]), np.sort(v[0]))
    check(jax.jit(lambda a, b: lax.sort((a, b), num_keys=1)[1])(k1, v), np.take_along_axis(
        v, np.argsort(k1, axis=-1, kind="stable"), -1))
    with pytest.raises(ValueError, match="num_keys"):
        lax.sort((k1, v), num_keys=3)
    with pytest.raises(TypeError, match="same shape"):
        lax.sort((k1, v[:2]))
    with pytest.raises(TypeError, match="rank"):
        lax.sort(np.float32(1))


@pytest.mark.parametrize("seed", range(6))
def test_lexsort_matches_numpy(seed):
    rng = np.random.default_rng(50 + seed)
    shape = tuple(rng.integers(1, 6, size=rng.integers(1, 3)))
    keys = [rand(shape, DTYPES[(seed + i) % len(DTYPES)], rng, 0, 3) for i in range(1 + seed % 3)]
    axis = int(rng.integers(-len(shape), len(shape)))
    check(jnp.lexsort(keys, axis=axis), np.lexsort(keys, axis=axis).astype(np.int32))
    with pytest.raises(TypeError, match="len > 0"):
        jnp.lexsort([])


def test_sort_argument_errors():
    with pytest.raises(TypeError, match="'kind' argument"):
        jnp.sort(np.ones(3), kind="stable")
    with pytest.raises(TypeError, match="'order' argument"):
        jnp.argsort(np.ones(3), order="x")
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.sort(np.ones((2, 3)), axis=2)


def test_top_k_like_jax(real_jax):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 4, size=(3, 10)).astype(np.float32)
    x[0, 3] = np.nan
    x[1, :4] = [-0.0, 0.0, 0.0, -0.0]
    for k in (0, 1, 4, 10):
        for axis in (-1, 0) if k <= 3 else (-1,):
            got_v, got_i = lax.top_k(x, k, axis=axis)
            want_v, want_i = real_jax.lax.top_k(x, k, axis=axis)
            check(got_v, np.asarray(want_v))
            check(got_i, np.asarray(want_i))
            np.testing.assert_array_equal(np.signbit(np.asarray(got_v)), np.signbit(np.asarray(want_v)))
    xi = rng.integers(-100, 100, size=(2, 3, 7)).astype(np.int8)
    for got, want in zip(lax.top_k(xi, 3), real_jax.lax.top_k(xi, 3)):
        check(got, np.asarray(want))
    with pytest.raises(TypeError, match="no larger than"):
        lax.top_k(x, 11)
    with pytest.raises(ValueError, match="nonnegative"):
        lax.top_k(x, -1)


def test_searchsorted_matches_numpy_and_jax(real_jax):
    rng = np.random.default_rng(9)
    a = np.sort(rng.integers(0, 10, size=12)).astype(np.float32)
    v = rng.integers(-2, 12, size=(3, 4)).astype(np.float32)
    for side in ("left", "right"):
        check(jnp.searchsorted(a, v, side=side), np.searchsorted(a, v, side=side).astype(np.int32))
    perm = rng.permutation(12)
    check(jnp.searchsorted(a[perm], v, sorter=np.argsort(a[perm])), np.searchsorted(a, v).astype(np.int32))
    check(jnp.searchsorted(a.astype(np.int32), 3.5), np.searchsorted(a, 3.5).astype(np.int32))
    check(jnp.searchsorted(np.zeros(0, np.float32), v), np.zeros((3, 4), np.int32))
    an = np.array([0.0, 1.0, np.nan], np.float32)
    vn = np.array([np.nan, 1.0, 2.0, -0.0], np.float32)
    for side in ("left", "right"):
        check(jnp.searchsorted(an, vn, side=side), np.asarray(real_jax.numpy.searchsorted(an, vn, side=side)))
    with pytest.raises(ValueError, match="side"):
        jnp.searchsorted(a, v, side="middle")
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.searchsorted(a.reshape(3, 4), v)


def test_unique_matches_numpy_and_jax(real_jax):
    x = np.array([[3, 1, 1], [np.nan, 2, np.nan]], np.float32)
    got = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
    want = real_jax.numpy.unique(x, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        check(g, np.asarray(w))
    xi = np.array([4, 1, 4, 2, 2, 9], np.int32)
    check(jnp.unique(xi), np.unique(xi))
    check(jnp.unique(xi, size=6), np.asarray(real_jax.numpy.unique(xi, size=6)))
    check(jnp.unique(xi, size=2), np.asarray(real_jax.numpy.unique(xi, size=2)))
    check(jnp.unique(xi, size=5, fill_value=0), np.asarray(real_jax.numpy.unique(xi, size=5, fill_value=0)))
    with pytest.raises(TypeError, match="concrete"):
        jax.jit(jnp.unique)(xi)
