"""Windowed reductions (reduce_window_sum/max/min) and the pooling
derivatives (select_and_scatter_add, select_and_gather_add) against real
JAX: values over random windows, strides, paddings and dilations, dtypes,
gradients (ties go to the first maximum, as XLA selects), second
derivatives, vmap, jaxprs, flax-style pooling, Explicit sharding, errors."""
import re

import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp
from meshsim import lax
from outcomes import outcome

jax = pytest.importorskip("jax")
jlax = jax.lax

MONOIDS = {"sum": (0.0, "add"), "max": (-np.inf, "max"), "min": (np.inf, "min")}


def random_window(rng, shape, dilate=True):
    nd = len(shape)
    window = tuple(int(rng.integers(1, 4)) for _ in range(nd))
    strides = tuple(int(rng.integers(1, 3)) for _ in range(nd))
    base = tuple(int(rng.integers(1, 3)) for _ in range(nd)) if dilate else (1,) * nd
    wdil = tuple(int(rng.integers(1, 3)) for _ in range(nd)) if dilate else (1,) * nd
    padding = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(nd))
    return dict(window_dimensions=window, window_strides=strides, padding=padding, base_dilation=base,
                window_dilation=wdil)


def pool(lib_lax, kind, x, kw):
    init, op = MONOIDS[kind]
    return lib_lax.reduce_window(x, np.asarray(init, x.dtype) if kind == "sum" else init,
                                 getattr(lib_lax, op), **kw)


@pytest.mark.parametrize("kind", sorted(MONOIDS))
@pytest.mark.parametrize("seed", range(10))
def test_random_windows_match_jax(kind, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(rng.integers(1, 7)) for _ in range(int(rng.integers(1, 4))))
    x = rng.standard_normal(shape).astype(np.float32)
    kw = random_window(rng, shape)
    expected = np.asarray(pool(jlax, kind, x, kw))
    got = np.asarray(pool(lax, kind, x, kw))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", sorted(MONOIDS))
@pytest.mark.parametrize("seed", range(8))
def test_random_window_gradients_match_jax(kind, seed):
    rng = np.random.default_rng(50 + seed)
    shape = tuple(int(rng.integers(2, 7)) for _ in range(int(rng.integers(1, 4))))
    # Rounded values make ties, which go to the window's first extremum.
    x = np.round(rng.standard_normal(shape), 1).astype(np.float32)
    kw = random_window(rng, shape)
    if kind != "sum":
        kw["window_dilation"] = (1,) * len(shape)  # JAX has no max-pool VJP with window dilation
    ct = rng.standard_normal(jax.eval_shape(lambda a: pool(jlax, kind, a, kw), x).shape).astype(np.float32)
    expected = jax.grad(lambda a: (pool(jlax, kind, a, kw) * ct).sum())(x)
    got = meshsim.grad(lambda a: (pool(lax, kind, a, kw) * ct).sum())(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_ties_go_to_the_first_maximum():
    x = np.zeros((4, 4), np.float32)
    g = meshsim.grad(lambda a: lax.reduce_window(a, -np.inf, lax.max, (2, 2), (2, 2), "VALID").sum())(x)
    expected = np.zeros((4, 4), np.float32)
    expected[::2, ::2] = 1
    np.testing.assert_array_equal(np.asarray(g), expected)


def test_second_derivative_of_max_pooling_matches_jax():
    x = np.random.default_rng(1).standard_normal((2, 6, 6)).astype(np.float32)
    kw = dict(window_dimensions=(1, 3, 3), window_strides=(1, 2, 2), padding="SAME")

    def f(lib_lax, lib):
        inner = lambda a: (lib_lax.reduce_window(a, -np.inf, lib_lax.max, **kw) ** 2).sum()  # noqa: E731
        return lambda a: (lib.grad(inner)(a) * a).sum()

    np.testing.assert_allclose(np.asarray(meshsim.grad(f(lax, meshsim))(x)),
                               np.asarray(jax.grad(f(jlax, jax))(x)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, "bfloat16", np.float16])
@pytest.mark.parametrize("kind", sorted(MONOIDS))
def test_dtypes_match_jax(dtype, kind):
    rng = np.random.default_rng(3)
    dt = jnp.dtype(dtype)
    x = rng.integers(0, 50, (3, 7, 5)).astype(dt)
    init = np.asarray({"sum": 0, "max": jnp.iinfo(dt).min if dt.kind in "iu" else -np.inf,
                       "min": jnp.iinfo(dt).max if dt.kind in "iu" else np.inf}[kind], dt)
    kw = dict(window_dimensions=(1, 3, 2), window_strides=(1, 2, 1), padding="SAME")
    op = MONOIDS[kind][1]
    expected = jlax.reduce_window(x, init, getattr(jlax, op), **kw)
    got = lax.reduce_window(x, init, getattr(lax, op), **kw)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(expected, np.float64), rtol=1e-2)


def test_bool_max_pooling():
    x = np.random.default_rng(4).integers(0, 2, (5, 6)).astype(bool)
    args = ((2, 2), (1, 2), "VALID")
    np.testing.assert_array_equal(np.asarray(lax.reduce_window(x, False, lax.max, *args)),
                                  np.asarray(jlax.reduce_window(x, False, jlax.max, *args)))


@pytest.mark.parametrize("kind", sorted(MONOIDS))
def test_vmap_matches_jax(kind):
    x = np.random.default_rng(5).standard_normal((3, 4, 6, 5)).astype(np.float32)
    kw = dict(window_dimensions=(2, 3, 2), window_strides=(1, 2, 1), padding="SAME")
    f = lambda lib_lax: lambda a: pool(lib_lax, kind, a, kw)  # noqa: E731
    for axis in (0, 2):
        np.testing.assert_allclose(np.asarray(meshsim.vmap(f(lax), in_axes=axis)(x)),
                                   np.asarray(jax.vmap(f(jlax), in_axes=axis)(x)), rtol=1e-5, atol=1e-5)
    g = lambda lib, lib_lax: lib.vmap(lib.grad(lambda a: pool(lib_lax, kind, a, kw).sum()))  # noqa: E731
    np.testing.assert_allclose(np.asarray(g(meshsim, lax)(x)), np.asarray(g(jax, jlax)(x)), rtol=1e-5, atol=1e-5)
    jaxpr = str(meshsim.make_jaxpr(meshsim.vmap(f(lax)))(x))
    assert "while" not in jaxpr and jaxpr.count("reduce_window_") == 1


@pytest.mark.parametrize("kind", sorted(MONOIDS))
def test_jaxprs_print_as_jax(kind):
    x = np.ones((2, 6, 6, 3), np.float32)
    kw = dict(window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1), padding="VALID")
    f = lambda lib_lax: lambda a: pool(lib_lax, kind, a, kw).sum()  # noqa: E731
    assert str(meshsim.make_jaxpr(f(lax))(x)) == str(jax.make_jaxpr(f(jlax))(x))
    # JAX's sum transpose builds its pad config from NumPy ints, which print as np.int64(n).
    theirs = re.sub(r"np\.int64\((-?\d+)\)", r"\1", str(jax.make_jaxpr(jax.grad(f(jlax)))(x)))
    assert str(meshsim.make_jaxpr(meshsim.grad(f(lax)))(x)) == theirs


def _flax_max_pool(lib, x, window, strides, padding):
    """flax.linen.max_pool's composition (NHWC, window over the spatial dims)."""
    dims = (1,) + window + (1,)
    return lib.lax.reduce_window(x, -lib.numpy.inf, lib.lax.max, dims, (1,) + strides + (1,), padding)


def _flax_avg_pool(lib, x, window, strides, padding):
    dims = (1,) + window + (1,)
    summed = lib.lax.reduce_window(x, 0.0, lib.lax.add, dims, (1,) + strides + (1,), padding)
    counts = lib.lax.reduce_window(lib.numpy.ones(x.shape[1:3] + (1,)), 0.0, lib.lax.add,
                                   window + (1,), strides + (1,), padding)
    return summed / counts


@pytest.mark.parametrize("pool_fn", [_flax_max_pool, _flax_avg_pool])
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_flax_style_pooling_and_its_gradient(pool_fn, padding):
    x = np.random.default_rng(6).standard_normal((2, 7, 6, 3)).astype(np.float32)
    for lib_pair in [(meshsim, jax)]:
        outs = [pool_fn(lib, x, (3, 2), (2, 2), padding) for lib in lib_pair]
        np.testing.assert_allclose(np.asarray(outs[0]), np.asarray(outs[1]), rtol=1e-5, atol=1e-5)
        grads = [lib.grad(lambda a, lib=lib: (pool_fn(lib, a, (3, 2), (2, 2), padding) ** 2).sum())(x)
                 for lib in lib_pair]
        np.testing.assert_allclose(np.asarray(grads[0]), np.asarray(grads[1]), rtol=1e-5, atol=1e-5)


def test_batch_sharded_pooling_keeps_the_batch_sharding():
    x = np.random.default_rng(7).standard_normal((8, 6, 6, 2)).astype(np.float32)
    outs = []
    for lib in (meshsim, jax):
        mesh = lib.make_mesh((4, 2), ("dp", "tp"))
        with lib.set_mesh(mesh):
            xs = lib.device_put(x, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("dp")))
            f = lib.jit(lambda a, lib=lib: (_flax_max_pool(lib, a, (2, 2), (2, 2), "VALID"),
                                            lib.grad(lambda b: _flax_avg_pool(lib, b, (2, 2), (1, 1), "SAME").sum())(a)))
            outs.append([(str(lib.typeof(v)), np.asarray(v)) for v in f(xs)])
    for (t1, v1), (t2, v2) in zip(*outs):
        assert t1 == t2
        np.testing.assert_allclose(v1, v2, rtol=1e-5, atol=1e-5)


def test_cost_counts_window_elements():
    x = np.ones((4, 8, 8), np.float32)
    f = lambda a: lax.reduce_window(a, 0.0, lax.add, (1, 2, 2), (1, 2, 2), "VALID")  # noqa: E731
    assert meshsim.jit(f).lower(x).compile().cost_analysis()["flops"] == 4 * 4 * 4 * 4


ERROR_CASES = {
    "rank": lambda l, x: l.reduce_window(x, 0.0, l.add, (2, 2), (1, 1, 1), "VALID"),
    "strides": lambda l, x: l.reduce_window(x, 0.0, l.add, (1, 2, 2), (1, 1), "VALID"),
    "zero_stride": lambda l, x: l.reduce_window(x, 0.0, l.add, (1, 2, 2), (1, 0, 1), "VALID"),
    "padding": lambda l, x: l.reduce_window(x, 0.0, l.add, (1, 2, 2), (1, 1, 1), "FULL"),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors_match_jax(case):
    x = np.ones((2, 4, 4), np.float32)

    expected = outcome(ERROR_CASES[case], jlax, x)
    assert expected[0] != "ok" and outcome(ERROR_CASES[case], lax, x) == expected
