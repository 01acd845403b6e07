"""meshsim.nn's further activations, standardize, logmeanexp,
dot_product_attention and nn.initializers, against jax.nn: values, dtypes
(weak types included), shapes and error texts on random inputs."""
import numpy as np
import pytest

import meshsim.nn as nn
import meshsim.numpy as jnp
import meshsim.random as mr

ACTIVATIONS = ["identity", "celu", "selu", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "mish",
               "soft_sign", "squareplus", "log1mexp", "sparse_plus", "sparse_sigmoid"]


@pytest.fixture(scope="module")
def jnn(real_jax):
    import jax.nn
    return jax.nn


def assert_like(ours, theirs, rtol=2e-6, atol=1e-6):
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert ours.weak_type == theirs.weak_type
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_match_jax(jnn, name):
    rng = np.random.default_rng(len(name))
    for shape in [(), (0,), (9,), (3, 4)]:
        x = rng.normal(0, 3, shape).astype(np.float32)
        if name == "log1mexp":
            x = np.abs(x) + 1e-3
        assert_like(getattr(nn, name)(jnp.asarray(x)), getattr(jnn, name)(x))
    # Python scalars stay weakly typed; integer inputs promote as JAX does.
    assert_like(getattr(nn, name)(0.75), getattr(jnn, name)(0.75))
    if name not in ("log1mexp",):
        assert_like(getattr(nn, name)(np.int32([-2, 0, 3])), getattr(jnn, name)(np.int32([-2, 0, 3])))
    with pytest.raises(TypeError, match=f"{name if name != 'hard_swish' else 'hard_silu'} requires ndarray"):
            getattr(nn, name)([1.0, 2.0])


def test_parametrised_activations(jnn):
    x = np.random.default_rng(0).normal(0, 2, (4, 6)).astype(np.float32)
    assert_like(nn.celu(x, alpha=0.5), jnn.celu(x, alpha=0.5))
    assert_like(nn.squareplus(x, b=1.5), jnn.squareplus(x, b=1.5))
    for axis in (0, 1, -1):
        assert_like(nn.glu(x, axis), jnn.glu(x, axis))
    with pytest.raises(AssertionError, match="axis size must be divisible by 2"):
        nn.glu(np.ones((3, 3), np.float32))


def test_standardize_and_logmeanexp(jnn):
    rng = np.random.default_rng(1)
    x = rng.normal(2, 3, (3, 5, 4)).astype(np.float32)
    where = rng.random((3, 5, 4)) > 0.3
    for axis in (-1, 0, (0, 2)):
        for algorithm in ("fast", "stable"):
            assert_like(nn.standardize(x, axis, algorithm=algorithm), jnn.standardize(x, axis, algorithm=algorithm),
                        rtol=1e-4, atol=1e-5)
        assert_like(nn.standardize(x, axis, where=where, algorithm="stable"),
                    jnn.standardize(x, axis, where=where, algorithm="stable"), rtol=1e-4, atol=1e-5)
        for keepdims in (False, True):
            assert_like(nn.logmeanexp(x, axis, keepdims=keepdims), jnn.logmeanexp(x, axis, keepdims=keepdims))
            assert_like(nn.logmeanexp(x, axis, where=where, keepdims=keepdims),
                        jnn.logmeanexp(x, axis, where=where, keepdims=keepdims))
    assert_like(nn.logmeanexp(x), jnn.logmeanexp(x))
    m, v = np.float32(1.5), np.float32(4.0)
    assert_like(nn.standardize(x, mean=m, variance=v), jnn.standardize(x, mean=m, variance=v))
    with pytest.raises(ValueError, match="Unknown algorithm 'slow'. Expected 'fast' or 'stable'."):
        nn.standardize(x, algorithm="slow")


def _attention_inputs(rng, B, T, S, N, K, H):
    q = rng.normal(size=(B, T, N, H)).astype(np.float32)
    k = rng.normal(size=(B, S, K, H)).astype(np.float32)
    v = rng.normal(size=(B, S, K, H)).astype(np.float32)
    return q, k, v


def test_dot_product_attention_matches_jax(jnn):
    rng = np.random.default_rng(2)
    for trial in range(5):
        B, T, S, K, H = (int(n) for n in rng.integers(1, 5, 5))
        N = K * int(rng.integers(1, 3))
        q, k, v = _attention_inputs(rng, B, T, S, N, K, H)
        bias = rng.normal(size=(B, 1 if trial % 2 else N, T, S)).astype(np.float32)
        mask = rng.random((B, N, T, S)) > 0.3
        qlen = rng.integers(1, T + 1, B).astype(np.int32)
        kvlen = rng.integers(1, S + 1, B).astype(np.int32)
        for kwargs in [{}, {"bias": bias}, {"mask": mask}, {"is_causal": True}, {"scale": 0.3},
                       {"query_seq_lengths": qlen, "key_value_seq_lengths": kvlen},
                       {"local_window_size": 1}, {"bias": bias, "mask": mask, "is_causal": True}]:
            assert_like(nn.dot_product_attention(q, k, v, **kwargs), jnn.dot_product_attention(q, k, v, **kwargs),
                        rtol=1e-5, atol=1e-5)
        out, res = nn.dot_product_attention(q, k, v, is_causal=True, return_residual=True)
        jout, jres = jnn.dot_product_attention(q, k, v, is_causal=True, return_residual=True)
        assert_like(out, jout, rtol=1e-5, atol=1e-5)
        assert_like(res, jres, rtol=1e-5, atol=1e-5)
    # 3-D inputs (no batch) keep their shape
    q, k, v = _attention_inputs(rng, 1, 3, 4, 2, 2, 5)
    assert_like(nn.dot_product_attention(q[0], k[0], v[0]), jnn.dot_product_attention(q[0], k[0], v[0]),
                rtol=1e-5, atol=1e-5)


def test_dot_product_attention_errors(jnn):
    rng = np.random.default_rng(3)
    q, k, v = _attention_inputs(rng, 2, 3, 4, 3, 2, 5)
    for mod in (nn, jnn):
        with pytest.raises(ValueError, match="The number of query heads must be a multiple of key/value heads, "
                                             "but got 3 vs 2"):
            mod.dot_product_attention(q, k, v)
    q, k, v = _attention_inputs(rng, 2, 3, 4, 2, 2, 5)
    for mod in (nn, jnn):
        with pytest.raises(ValueError, match=r"value shape should be \[2, 4, 2, 5\]: but got \(2, 4, 2, 4\)"):
            mod.dot_product_attention(q, k, v[..., :4])
        with pytest.raises(ValueError, match="mask dtype should be bool, but got float32"):
            mod.dot_product_attention(q, k, v, mask=np.ones((2, 2, 3, 4), np.float32))
        with pytest.raises(ValueError, match="Unsupported implementation option: tpu"):
            mod.dot_product_attention(q, k, v, implementation="tpu")


INITIALIZERS = ["glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal", "lecun_uniform",
                "lecun_normal", "he_uniform", "he_normal", "kaiming_uniform", "kaiming_normal"]


def test_initializers_match_jax(jnn, real_jax):
    jr = real_jax.random
    rng = np.random.default_rng(4)
    for trial in range(3):
        seed = int(rng.integers(0, 2 ** 31))
        shape = tuple(int(n) for n in rng.integers(1, 6, int(rng.integers(2, 5))))
        for name in INITIALIZERS:
            ours = getattr(nn.initializers, name)()(mr.key(seed), shape)
            theirs = getattr(jnn.initializers, name)()(jr.key(seed), shape)
            # truncated normals go through erf, which rounds differently from XLA's by an ulp or two
            exact = "uniform" in name
            assert_like(ours, theirs, rtol=0 if exact else 1e-6, atol=0 if exact else 1e-7)
        for mode in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
            for dist in ("normal", "uniform", "truncated_normal"):
                kw = dict(in_axis=0, out_axis=(1,), batch_axis=()) if len(shape) > 2 else {}
                ours = nn.initializers.variance_scaling(0.7, mode, dist, **kw)(mr.key(seed), shape)
                theirs = jnn.initializers.variance_scaling(0.7, mode, dist, **kw)(jr.key(seed), shape)
                assert_like(ours, theirs, rtol=0 if dist != "truncated_normal" else 1e-6, atol=1e-7)
        for make in [lambda m: m.normal(0.3), lambda m: m.uniform(2.0), lambda m: m.truncated_normal(0.5)]:
            assert_like(make(nn.initializers)(mr.key(seed), shape), make(jnn.initializers)(jr.key(seed), shape),
                        rtol=1e-6, atol=1e-7)
    for name in ("zeros", "ones"):
        assert_like(getattr(nn.initializers, name)(mr.key(0), (2, 3)),
                    getattr(jnn.initializers, name)(jr.key(0), (2, 3)))
    assert_like(nn.initializers.constant(-1.5)(mr.key(0), (4,), np.int32),
                jnn.initializers.constant(-1.5)(jr.key(0), (4,), np.int32))
    # raw keys give the same parameters
    np.testing.assert_array_equal(nn.initializers.he_uniform()(mr.PRNGKey(1), (3, 4)),
                                  jnn.initializers.he_uniform()(jr.PRNGKey(1), (3, 4)))


def test_initializer_errors(jnn, real_jax):
    for mod, key in ((nn, mr.key(0)), (jnn, real_jax.random.key(0))):
        with pytest.raises(ValueError, match="Can't compute input and output sizes of a 1-dimensional"):
            mod.initializers.glorot_uniform()(key, (5,))
        with pytest.raises(ValueError, match="invalid mode for variance scaling initializer: fan"):
            mod.initializers.variance_scaling(1.0, "fan", "normal")(key, (2, 3))
        with pytest.raises(ValueError, match="invalid distribution for variance scaling initializer: cauchy"):
            mod.initializers.variance_scaling(1.0, "fan_in", "cauchy")(key, (2, 3))
