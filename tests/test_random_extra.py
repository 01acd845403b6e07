"""meshsim.random's samplers built on uniform/normal/bits (exponential, laplace,
..., wald) against JAX for the same keys: shapes, dtypes, values (bit for bit
where only uniform and exact arithmetic are involved, within a few ulps where
a transcendental function differs from XLA's), argument checks."""
import numpy as np
import pytest

import meshsim.random as mr
from test_random import ulps

F32 = np.float32


@pytest.fixture(scope="module")
def jr(real_jax):
    return real_jax.random


# name, positional parameters, worst ulp distance to JAX
CASES = [
    ("exponential", (), 4), ("laplace", (), 4), ("logistic", (), 4), ("cauchy", (), 4),
    ("maxwell", (), 4), ("lognormal", (F32(0.5),), 8), ("rayleigh", (F32(2.0),), 4),
    ("pareto", (F32([1.5, 3.0, 0.7]),), 16), ("weibull_min", (2.0, 1.5), 4),
    ("triangular", (0.0, F32([0.3, 0.5, 0.9]), 1.0), 0), ("wald", (F32([1.0, 2.0, 0.5]),), 4),
    ("double_sided_maxwell", (1.0, 2.0), 4),
]


@pytest.mark.parametrize("name,params,max_ulp", CASES, ids=[c[0] for c in CASES])
def test_float_samplers_match_jax(jr, name, params, max_ulp):
    rng = np.random.default_rng(len(name))
    for trial in range(3):
        seed = int(rng.integers(0, 2 ** 31))
        shape = (int(rng.integers(1, 6)), 3)
        ours = getattr(mr, name)(mr.key(seed), *params, shape=shape)
        theirs = getattr(jr, name)(jr.key(seed), *params, shape=shape)
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        assert ours.weak_type == theirs.weak_type
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        assert np.all(np.isfinite(ours) == np.isfinite(theirs))
        finite = np.isfinite(theirs)
        assert ulps(ours[finite], theirs[finite]).max(initial=0) <= max_ulp, name
        # raw uint32 keys give the same numbers as typed keys
        raw = getattr(mr, name)(mr.PRNGKey(seed), *params, shape=shape)
        np.testing.assert_array_equal(np.asarray(raw), ours)


# JAX runs these samplers under jit, where XLA keeps the bfloat16 and float16
# steps it fuses in float32 (the squares summed by maxwell's norm, the
# log-gammas dirichlet's softmax exponentiates): bit for bit when meshsim stages
# them the same way.
JITTED_SAMPLERS = {
    "maxwell": (("bfloat16", "float16"), lambda r, k, rng, shape, dt: r.maxwell(k, shape, dt)),
    "double_sided_maxwell": (("bfloat16", "float16"), lambda r, k, rng, shape, dt: r.double_sided_maxwell(
        k, float(rng.normal()), float(rng.uniform(0.5, 3.0)), shape, dt)),
    "dirichlet": (("bfloat16",), lambda r, k, rng, shape, dt: r.dirichlet(
        k, rng.uniform(0.05, 5.0, int(rng.integers(2, 5))).astype(F32), shape, dt)),
}


@pytest.mark.parametrize("name,dtype", [(n, d) for n, (dts, _) in JITTED_SAMPLERS.items() for d in dts])
def test_jitted_narrow_samplers_bit_for_bit(jr, name, dtype):
    import ml_dtypes
    dt = np.dtype(getattr(ml_dtypes, dtype, dtype))
    draw = JITTED_SAMPLERS[name][1]
    for trial in range(4):
        rng = np.random.default_rng([len(name), len(dtype), trial])
        seed = int(rng.integers(0, 2 ** 31))
        shape = tuple(int(v) for v in rng.integers(1, 7, rng.integers(1, 3)))
        ours = draw(mr, mr.key(seed), np.random.default_rng(seed), shape, dt)
        theirs = draw(jr, jr.key(seed), np.random.default_rng(seed), shape, dt)
        assert ours.dtype == theirs.dtype == dt and ours.shape == theirs.shape
        np.testing.assert_array_equal(np.asarray(ours).view(np.uint16), np.asarray(theirs).view(np.uint16))


@pytest.mark.parametrize("name,params", [("lognormal", (F32([0.5, 1.0]),)), ("rayleigh", (F32([[1.0], [2.0]]),)),
                                         ("geometric", (F32([0.2, 0.7]),)), ("wald", (F32([1.0, 3.0]),)),
                                         ("triangular", (0.0, F32([0.2, 0.8]), 1.0))])
def test_shape_defaults_to_parameter_shape(jr, name, params):
    ours = getattr(mr, name)(mr.key(3), *params)
    theirs = getattr(jr, name)(jr.key(3), *params)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5)


def test_integer_samplers_match_jax(jr):
    for seed, shape in [(0, (7,)), (5, (3, 4)), (11, ())]:
        np.testing.assert_array_equal(mr.rademacher(mr.key(seed), shape),
                                      jr.rademacher(jr.key(seed), shape))
        for p in [0.05, 0.5, F32(0.9)]:
            ours, theirs = mr.geometric(mr.key(seed), p, shape), jr.geometric(jr.key(seed), p, shape)
            assert ours.dtype == theirs.dtype
            np.testing.assert_array_equal(ours, theirs)
    for dtype in [np.int8, np.float32, np.uint16]:
        ours, theirs = mr.rademacher(mr.key(2), (6,), dtype), jr.rademacher(jr.key(2), (6,), dtype)
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
    g = np.asarray(mr.geometric(mr.key(9), 0.25, (4000,)))
    assert g.min() >= 1 and abs(g.mean() - 4.0) < 0.3


def test_sample_moments():
    n = 20000
    assert abs(float(mr.exponential(mr.key(0), (n,)).mean()) - 1) < 0.05
    assert abs(float(mr.laplace(mr.key(1), (n,)).var()) - 2) < 0.15
    assert abs(float(mr.rayleigh(mr.key(2), 1.0, (n,)).mean()) - np.sqrt(np.pi / 2)) < 0.03
    assert abs(float(mr.wald(mr.key(3), 2.0, (n,)).mean()) - 2) < 0.1
    t = np.asarray(mr.triangular(mr.key(4), -1.0, 0.5, 2.0, (n,)))
    assert t.min() >= -1 and t.max() <= 2 and abs(t.mean() - 0.5) < 0.05


def test_errors_match_jax(jr):
    for fn in ["exponential", "laplace", "logistic", "cauchy", "maxwell"]:
        for mod in (mr, jr):
            with pytest.raises(ValueError, match=f"dtype argument to `{fn}` must be a float dtype, got int32"):
                getattr(mod, fn)(mod.key(0), (2,), np.int32)
    for mod in (mr, jr):
        with pytest.raises(ValueError, match="dtype argument to `geometric` must be an int dtype"):
            mod.geometric(mod.key(0), 0.5, (2,), np.float32)
        with pytest.raises(ValueError, match="rayleigh parameter shapes must be broadcast-compatible"):
            mod.rayleigh(mod.key(0), F32([[1.0, 2.0]] * 3), (2,))
        with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: shapes=\[\(3,\), \(2,\)\]"):
            mod.rayleigh(mod.key(0), F32([1.0, 2.0]), (3,))
        with pytest.raises(ValueError, match="accepts a single key"):
            mod.exponential(mod.split(mod.key(0)), (2,))


def test_key_dtype_and_clone(jr):
    assert str(mr.key_dtype()) == str(jr.key_dtype()) == "key<fry>"
    assert mr.key(0).dtype == mr.key_dtype()
    k = mr.key(4)
    np.testing.assert_array_equal(mr.key_data(mr.clone(k)), mr.key_data(k))
    np.testing.assert_array_equal(mr.uniform(mr.clone(k), (3,)), jr.uniform(jr.clone(jr.key(4)), (3,)))
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        mr.key_dtype("nope")


def test_truncated_normal_gradient_by_its_bounds_matches_jax():
    """The samples move with the bounds through the inverse CDF; the clamp into the open
    interval is not differentiated (JAX stops the gradient there)."""
    import jax as real
    import meshsim
    rng = np.random.default_rng(3)
    lower = rng.standard_normal((3, 4)).astype(np.float32)
    ct = rng.standard_normal((3, 4)).astype(np.float32)

    def loss(lib, key):
        return lambda lo, hi: (lib.random.truncated_normal(key, lo, hi) * ct).sum()

    got = meshsim.grad(loss(meshsim, meshsim.random.key(5)), argnums=(0, 1))(lower, lower + 2)
    want = real.grad(loss(real, real.random.key(5)), argnums=(0, 1))(lower, lower + 2)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3, atol=1e-4)
