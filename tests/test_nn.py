"""meshsim.nn against NumPy formulas (float64) and against jax.nn: values,
dtypes, numerical stability at extreme inputs, axes, masks and one_hot."""
import warnings

import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp
import meshsim.nn as nn


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _erf(x):
    from math import erf
    return np.vectorize(erf)(x)


REFERENCES = {
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "sigmoid": _sigmoid,
    "silu": lambda x: x * _sigmoid(x),
    "swish": lambda x: x * _sigmoid(x),
    "softplus": lambda x: np.logaddexp(x, 0),
    "log_sigmoid": lambda x: -np.logaddexp(-x, 0),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "tanh": np.tanh,
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
}


def assert_close(actual, expected, rtol=2e-6, atol=1e-6):
    actual = np.asarray(actual)
    np.testing.assert_allclose(actual, np.asarray(expected, np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_activation_matches_numpy(name):
    rng = np.random.default_rng(0)
    for shape in [(), (0,), (7,), (3, 4)]:
        x = rng.normal(0, 4, shape).astype(np.float32)
        out = getattr(nn, name)(jnp.asarray(x))
        assert out.dtype == np.float32 and out.shape == shape
        assert_close(out, REFERENCES[name](x.astype(np.float64)))


def test_activations_are_stable_at_extremes():
    x = jnp.asarray(np.float32([-1000, -100, -20, 0, 20, 100, 1000]))
    for name in REFERENCES:
        out = np.asarray(getattr(nn, name)(x))
        assert not np.isnan(out).any(), name
    assert_close(nn.softplus(x), [0, 0, 2.0611537e-09, np.log(2), 20, 100, 1000])
    assert_close(nn.log_sigmoid(x), [-1000, -100, -20, -np.log(2), -2.0611537e-09, 0, 0])
    assert_close(nn.sigmoid(x), [0, 0, _sigmoid(-20.0), 0.5, _sigmoid(20.0), 1, 1])


def test_gelu_exact_and_integer_inputs():
    x = np.linspace(-5, 5, 41).astype(np.float32)
    assert_close(nn.gelu(jnp.asarray(x), approximate=False), 0.5 * x * (1 + _erf(x / np.sqrt(2))))
    ints = jnp.asarray(np.arange(-3, 4, dtype=np.int32))
    assert nn.relu(ints).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(nn.relu(ints)), [0, 0, 0, 0, 1, 2, 3])
    assert nn.relu6(ints).dtype == np.float32  # min with the float 6.0 promotes, as in JAX
    assert nn.gelu(ints).dtype == np.float32
    assert nn.elu(jnp.asarray(np.float32([-1, 2])), alpha=2.0).dtype == np.float32
    assert_close(nn.leaky_relu(jnp.asarray(np.float32([-2, 3])), negative_slope=0.5), [-1, 3])


@pytest.mark.parametrize("axis", [-1, 0, 1, (0, 2)])
def test_softmax_and_log_softmax(axis):
    x = np.random.default_rng(1).normal(0, 3, (3, 4, 5)).astype(np.float32)
    ref = _softmax(x.astype(np.float64), axis)
    assert_close(nn.softmax(jnp.asarray(x), axis=axis), ref)
    assert_close(nn.log_softmax(jnp.asarray(x), axis=axis), np.log(ref), atol=1e-5)
    big = jnp.asarray(np.float32([[1000, 1000, -1000], [-1e30, 0, 1e30]]))
    assert_close(nn.softmax(big), [[0.5, 0.5, 0], [0, 0, 1]])
    assert np.isfinite(np.asarray(nn.log_softmax(big))[0, :2]).all()


def test_softmax_where_mask():
    x = np.float32([[1, 2, 3], [4, 5, 6]])
    mask = np.array([[True, False, True], [False, False, True]])
    out = np.asarray(nn.softmax(jnp.asarray(x), where=jnp.asarray(mask)))
    assert_close(out[0], [_softmax(np.float64([1, 3]), 0)[0], 0, _softmax(np.float64([1, 3]), 0)[1]])
    assert_close(out[1], [0, 0, 1])
    log_out = np.asarray(nn.log_softmax(jnp.asarray(x), where=jnp.asarray(mask)))
    assert log_out[0, 1] == -np.inf and log_out[1, 2] == 0


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (-1, True), ((0, 2), False)])
def test_logsumexp(axis, keepdims):
    x = np.random.default_rng(2).normal(0, 3, (2, 3, 4)).astype(np.float32)
    x64 = x.astype(np.float64)
    ax = axis if axis is not None else (0, 1, 2)
    ref = np.log(np.exp(x64).sum(ax, keepdims=keepdims))
    out = nn.logsumexp(jnp.asarray(x), axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(ref)
    assert_close(out, ref)
    b = np.random.default_rng(3).uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    total = (b * np.exp(x64)).sum(ax, keepdims=keepdims)
    value, sign = nn.logsumexp(jnp.asarray(x), axis=axis, b=jnp.asarray(b), keepdims=keepdims, return_sign=True)
    assert_close(value, np.log(np.abs(total)), atol=1e-5)
    np.testing.assert_array_equal(np.asarray(sign), np.sign(total))
    no_sign = np.asarray(nn.logsumexp(jnp.asarray(x), axis=axis, b=jnp.asarray(b), keepdims=keepdims))
    assert np.array_equal(np.isnan(no_sign), total < 0)


def test_logsumexp_extremes():
    big = jnp.asarray(np.float32([1000, 1000]))
    assert_close(nn.logsumexp(big), 1000 + np.log(2))
    assert float(nn.logsumexp(jnp.asarray(np.float32([-np.inf, -np.inf])))) == -np.inf
    assert float(nn.logsumexp(jnp.asarray(np.float32([np.inf, 0])))) == np.inf
    assert nn.logsumexp(jnp.asarray(np.arange(3))).dtype == np.float32


def test_one_hot():
    labels = np.array([0, 2, 3, -1, 7], np.int32)
    out = nn.one_hot(jnp.asarray(labels), 4)
    assert out.dtype == np.float32 and out.shape == (5, 4)
    np.testing.assert_array_equal(np.asarray(out), (labels[:, None] == np.arange(4)).astype(np.float32))
    first = nn.one_hot(jnp.asarray(labels), 4, axis=0, dtype=np.int32)
    assert first.dtype == np.int32 and first.shape == (4, 5)
    np.testing.assert_array_equal(np.asarray(first), (labels[None, :] == np.arange(4)[:, None]))
    grid = np.array([[1, 0], [2, 2]], np.int8)
    middle = nn.one_hot(jnp.asarray(grid), 3, axis=1)
    assert middle.shape == (2, 3, 2)
    np.testing.assert_array_equal(np.asarray(middle), np.moveaxis(np.eye(3)[grid], -1, 1))
    assert nn.one_hot(jnp.asarray(np.zeros(0, np.int32)), 3).shape == (0, 3)
    with pytest.raises(ValueError):
        nn.one_hot(jnp.asarray(labels), 4, axis=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.one_hot(jnp.asarray(np.float32([1.0])), 2)
    assert any("integer-typed" in str(w.message) for w in caught)


def test_nn_is_importable_from_the_top_level():
    assert meshsim.nn.relu is nn.relu
    assert set(nn.__all__) >= {"relu", "softmax", "log_softmax", "logsumexp", "one_hot", "gelu"}


def test_matches_jax_nn(real_jax):
    x = np.random.default_rng(4).normal(0, 6, (4, 6)).astype(np.float32)
    for name in sorted(REFERENCES) + ["softmax", "log_softmax", "logsumexp"]:
        ours, theirs = getattr(nn, name)(jnp.asarray(x)), getattr(real_jax.nn, name)(x)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, name
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-6, atol=1e-6, err_msg=name)
    for name in ["relu", "relu6", "sigmoid", "silu", "gelu", "softplus", "leaky_relu"]:
        for arg in [3, -2.5]:
            try:
                theirs = getattr(real_jax.nn, name)(arg)
            except TypeError:  # sigmoid of an integer
                with pytest.raises(TypeError):
                    getattr(nn, name)(arg)
                continue
            ours = getattr(nn, name)(arg)
            assert ours.dtype == theirs.dtype and ours.weak_type == theirs.weak_type, (name, arg)
    labels = np.array([[0, 3], [1, -2]])
    for axis in [-1, 0, 1]:
        np.testing.assert_array_equal(np.asarray(nn.one_hot(jnp.asarray(labels), 4, axis=axis)),
                                      np.asarray(real_jax.nn.one_hot(labels, 4, axis=axis)))


def test_nn_under_jit():
    f = meshsim.jit(lambda x: nn.softmax(nn.gelu(x) + nn.relu(x), axis=0))
    x = np.random.default_rng(5).normal(size=(4, 3)).astype(np.float32)
    x64 = x.astype(np.float64)
    assert_close(f(jnp.asarray(x)), _softmax(REFERENCES["gelu"](x64) + np.maximum(x64, 0), 0))
