"""meshsim.random: threefry2x32 keys and samplers, bit for bit against JAX.

Known-answer vectors come from reference/jax_semantics.md §6.6 (Random123
KATs and JAX's partitionable mode); everything else is compared with the
installed JAX. Floats that go through transcendental functions (erf_inv, log)
are compared in ulps, because XLA:CPU fuses multiply-adds into FMAs and has
its own log1p/log."""
import numpy as np
import pytest

import meshsim
import meshsim.random as mr
from meshsim._src import core, prng

U32 = np.uint32

# Worst ulp distance to JAX of normal / erf_inv-based samples; see ulps() below.
NORMAL_MAX_ULP = 3


@pytest.fixture(scope="module")
def jr(real_jax):
    return real_jax.random


def ulps(a, b) -> np.ndarray:
    """Distance in units of the last place between float32 arrays."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def data(keys) -> np.ndarray:
    return np.asarray(mr.key_data(keys))


# -- known answers (jax_semantics.md §6.1, §6.6)

SPLIT0 = [[1797259609, 2579123966], [928981903, 3453687069], [4146024105, 2718843009],
          [2467461003, 3840466878]]


@pytest.mark.parametrize("key, ctr, expected", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry_random123_known_answers(key, ctr, expected):
    y0, y1 = prng.threefry2x32(U32(key[0]), U32(key[1]), U32(ctr[0]), U32(ctr[1]))
    assert (int(y0), int(y1)) == expected


def test_threefry_broadcasts_key_words_over_counters(real_jax):
    from jax._src.random.threefry2x32 import threefry2x32_p
    rng = np.random.default_rng(0)
    k = rng.integers(0, 2 ** 32, (2,), dtype=U32)
    x0, x1 = rng.integers(0, 2 ** 32, (2, 3, 5), dtype=U32)
    ours = prng.threefry2x32(k[0], k[1:], x0, x1[:1])  # scalar, (1,), (3,5), (1,5)
    theirs = threefry2x32_p.bind(*(np.broadcast_to(v, (3, 5)) for v in (k[0], k[1], x0, x1[:1])))
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert meshsim.typeof(ours[0]).dtype == np.uint32


def test_threefry_rejects_non_uint32():
    with pytest.raises(TypeError, match="uint32"):
        prng.threefry2x32(np.int32(0), U32(0), U32(0), U32(0))


def test_key_data_vectors():
    np.testing.assert_array_equal(data(mr.key(0)), [0, 0])
    np.testing.assert_array_equal(data(mr.split(mr.key(0))), SPLIT0[:2])
    np.testing.assert_array_equal(data(mr.split(mr.key(0), 4)), SPLIT0)
    for d in range(4):
        np.testing.assert_array_equal(data(mr.fold_in(mr.key(0), d)), SPLIT0[d])
    np.testing.assert_array_equal(data(mr.split(mr.key(42))),
                                  [[1832780943, 270669613], [64467757, 2916123636]])


def test_bits_vectors():
    k = mr.key(0)
    first8 = [4070199207, 4202968722, 1427181096, 2012915765, 2447653815, 710830403, 1332275837,
              2961296638]
    np.testing.assert_array_equal(mr.bits(k, (8,), np.uint32), first8)
    np.testing.assert_array_equal(mr.bits(k, (2, 3), np.uint32), np.reshape(first8[:6], (2, 3)))
    u8 = mr.bits(k, (5,), np.uint8)
    assert u8.dtype == np.uint8
    np.testing.assert_array_equal(u8, [167, 146, 40, 53, 183])
    np.testing.assert_array_equal(mr.bits(k, (5,), np.uint16), [20391, 13970, 3624, 43061, 15287])
    # 64-bit words (reachable from Python with x64): b0 << 32 | b1.
    u64 = core.bind1("random_bits", mr.key_data(k), shape=(5,), bit_width=64)
    np.testing.assert_array_equal(u64, np.array([7719171245655871230, 3989946895414531357,
                                                 17807037942121513089, 10597664315880824766,
                                                 9817845818006947190], np.uint64))


@pytest.mark.parametrize("seed, uniform, normal", [
    (0, [0.947667, 0.9785799, 0.33229148, 0.46866846, 0.5698887],
     [1.6226422, 2.0252647, -0.43359444, -0.07861735, 0.1760909]),
    (1, [0.4386325, 0.5337529, 0.44591832, 0.43839633, 0.8973628],
     [-0.15443718, 0.084707275, -0.13598049, -0.15503626, 1.2666672]),
    (42, [0.48870957, 0.6797972, 0.6162715, 0.5610161, 0.4506446],
     [-0.028304616, 0.46713185, 0.29570296, 0.15354592, -0.12403282]),
])
def test_uniform_and_normal_vectors(seed, uniform, normal):
    u = mr.uniform(mr.key(seed), (5,))
    assert u.dtype == np.float32
    np.testing.assert_array_equal(u, np.float32(uniform))
    assert ulps(mr.normal(mr.key(seed), (5,)), np.float32(normal)).max() <= 1


def test_scalar_sample_is_element_zero():
    assert float(mr.normal(mr.key(0))) == float(np.asarray(mr.normal(mr.key(0), (3,)))[0])
    assert mr.normal(mr.key(0)).shape == ()
    np.testing.assert_array_equal(mr.bits(mr.key(7)), np.asarray(mr.bits(mr.key(7), (4,)))[0])


# -- keys: construction, typed vs raw, the key array type


@pytest.mark.parametrize("seed", [0, 1, 42, -1, 2 ** 31 - 1, -2 ** 31, 2 ** 32 - 1, 2 ** 40 + 3,
                                  np.int32(-5), np.uint32(7), np.int64(2 ** 40 + 3), np.int8(-1),
                                  True])
def test_seeding_matches_jax(jr, seed):
    np.testing.assert_array_equal(data(mr.key(seed)), jr.key_data(jr.key(seed)))
    raw = mr.PRNGKey(seed)
    assert isinstance(raw, meshsim.Array) and raw.dtype == np.uint32 and raw.shape == (2,)
    np.testing.assert_array_equal(raw, jr.PRNGKey(seed))


def test_key_array_type():
    k = mr.key(0)
    assert repr(k) == "Array((), dtype=key<fry>) overlaying:\n[0 0]"
    assert str(k.dtype) == "key<fry>" and k.dtype.name == "key<fry>"
    assert (k.shape, k.ndim, k.size) == ((), 0, 1)
    assert str(meshsim.typeof(k)) == "key<fry>[]"
    ks = mr.split(k, (2, 3))
    assert ks.shape == (2, 3) and str(meshsim.typeof(ks)) == "key<fry>[2,3]"
    assert repr(meshsim.typeof(ks)) == "ShapedArray(key<fry>[2,3])"
    assert mr.key_impl(k) == "threefry2x32"


def test_key_array_iteration_and_indexing():
    keys = mr.split(mr.key(0), 4)
    assert len(keys) == 4
    rows = [data(k) for k in keys]
    np.testing.assert_array_equal(rows, SPLIT0)
    k1, k2 = mr.split(mr.key(0))
    np.testing.assert_array_equal(data(k2), SPLIT0[1])
    grid = mr.split(mr.key(0), (2, 2))
    np.testing.assert_array_equal(data(grid[1, 0]), SPLIT0[2])
    np.testing.assert_array_equal(data(grid[:, 1]), [SPLIT0[1], SPLIT0[3]])
    np.testing.assert_array_equal(data(grid[..., 1]), [SPLIT0[1], SPLIT0[3]])
    assert grid.reshape(4).shape == (4,) and grid.ravel().shape == (4,)
    np.testing.assert_array_equal(np.asarray(keys == keys), [True] * 4)
    np.testing.assert_array_equal(np.asarray(keys[0] != keys[1]), True)


def test_key_array_misuse_errors():
    k = mr.key(0)
    with pytest.raises(TypeError, match="unsized"):
        len(k)
    with pytest.raises(TypeError, match="iteration over a 0-d key array"):
        iter(k)
    with pytest.raises(TypeError, match="boolean"):
        bool(k)
    with pytest.raises(TypeError, match="key_data"):
        np.asarray(k)
    with pytest.raises(TypeError):
        k == mr.key_data(k)  # noqa: B015


def test_key_data_wrap_roundtrip(jr):
    raw = np.array([[1, 2], [3, 4], [5, 6]], U32)
    keys = mr.wrap_key_data(raw)
    assert keys.shape == (3,)
    np.testing.assert_array_equal(data(keys), raw)
    np.testing.assert_array_equal(mr.key_data(raw), raw)  # raw data passes through
    np.testing.assert_array_equal(data(mr.split(keys[1], 3)), jr.key_data(jr.split(jr.wrap_key_data(raw)[1], 3)))


@pytest.mark.parametrize("bad", [np.zeros(3, U32), np.zeros(2, np.int32), np.zeros(2, np.float32),
                                 np.uint32(0), 0])
def test_invalid_raw_key_data(jr, bad):
    with pytest.raises(TypeError, match="invalid PRNG key data"):
        mr.split(bad)
    with pytest.raises(TypeError, match="invalid PRNG key data"):
        jr.split(bad)


def test_raw_keys_everywhere_give_raw_keys_and_same_values():
    raw, typed = mr.PRNGKey(3), mr.key(3)
    split_raw = mr.split(raw, 3)
    assert isinstance(split_raw, meshsim.Array) and split_raw.shape == (3, 2)
    np.testing.assert_array_equal(split_raw, data(mr.split(typed, 3)))
    folded = mr.fold_in(raw, 5)
    assert isinstance(folded, meshsim.Array)
    np.testing.assert_array_equal(folded, data(mr.fold_in(typed, 5)))
    for sample in (lambda k: mr.uniform(k, (4,)), lambda k: mr.normal(k, (4,)),
                   lambda k: mr.bits(k, (4,)), lambda k: mr.randint(k, (4,), 0, 9),
                   lambda k: mr.bernoulli(k, 0.3, (4,)), lambda k: mr.permutation(k, 6)):
        np.testing.assert_array_equal(sample(raw), sample(typed))


# -- split / fold_in


@pytest.mark.parametrize("num", [1, 2, 3, 7, (2, 3), (0,), (4, 0, 2), (), (1, 1, 5)])
def test_split_matches_jax(jr, num):
    for seed in (0, 12345):
        np.testing.assert_array_equal(data(mr.split(mr.key(seed), num)),
                                      jr.key_data(jr.split(jr.key(seed), num)))


def test_split_fold_in_symmetry():
    rng = np.random.default_rng(1)
    for seed in rng.integers(0, 2 ** 31, 4):
        k = mr.key(int(seed))
        keys = data(mr.split(k, 17))
        for d in rng.integers(0, 17, 5):
            np.testing.assert_array_equal(data(mr.fold_in(k, int(d))), keys[d])


@pytest.mark.parametrize("d", [0, 1, 2 ** 32 - 1, np.int32(-1), np.uint32(99), np.int8(-3), 2.7])
def test_fold_in_matches_jax(jr, d):
    np.testing.assert_array_equal(data(mr.fold_in(mr.key(11), d)),
                                  jr.key_data(jr.fold_in(jr.key(11), d)))


def test_key_ops_errors(jr):
    k = mr.key(0)
    for ours, theirs in [(lambda: mr.fold_in(k, -1), lambda: jr.fold_in(jr.key(0), -1)),
                         (lambda: mr.fold_in(k, 2 ** 32), lambda: jr.fold_in(jr.key(0), 2 ** 32))]:
        with pytest.raises(OverflowError):
            theirs()
        with pytest.raises(OverflowError):
            ours()
    with pytest.raises(TypeError, match="fold_in accepts a scalar"):
        mr.fold_in(k, np.arange(2))
    with pytest.raises(ValueError, match="split accepts a single key"):
        mr.split(mr.split(k))
    with pytest.raises(ValueError, match=r"shape \(3, 2\)"):
        mr.split(np.zeros((3, 2), U32))
    with pytest.raises(TypeError, match="unexpected PRNG key type"):
        mr.split([0, 0])
    with pytest.raises(TypeError):
        mr.split(k, 2.0)
    with pytest.raises(TypeError):
        mr.split(k, -1)
    with pytest.raises(TypeError, match="scalar seed, but was given a PRNG key"):
        mr.key(k)
    with pytest.raises(TypeError, match=r"shape \(2,\)"):
        mr.key(np.arange(2))
    with pytest.raises(TypeError, match="must be an integer"):
        mr.key(1.5)
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        mr.key(0, impl="rbg")


# -- keys through jit


def test_typed_keys_through_jit_and_make_jaxpr():
    k = mr.key(0)
    split = meshsim.jit(lambda key: mr.split(key, 3))
    keys = split(k)
    assert isinstance(keys, mr.PRNGKeyArray) and keys.shape == (3,)
    np.testing.assert_array_equal(data(keys), SPLIT0[:3])

    @meshsim.jit
    def sample(key):
        a, b = mr.split(key)
        assert str(meshsim.typeof(a)) == "key<fry>[]"
        return mr.normal(a, (4,)), mr.uniform(mr.fold_in(b, 2), (3,))

    n, u = sample(k)
    np.testing.assert_array_equal(n, mr.normal(mr.split(k)[0], (4,)))
    np.testing.assert_array_equal(u, mr.uniform(mr.fold_in(mr.split(k)[1], 2), (3,)))
    np.testing.assert_array_equal(data(meshsim.jit(mr.key)(42)), [0, 42])
    np.testing.assert_array_equal(data(meshsim.jit(mr.fold_in)(k, 3)), SPLIT0[3])
    jaxpr = str(meshsim.make_jaxpr(lambda key: mr.bits(key, (3,)))(k))
    assert "random_bits" in jaxpr and "u32[2]" in jaxpr
    assert meshsim.tree_util.tree_leaves(keys) == [keys]  # a key array is a leaf, as in JAX


# -- samplers against JAX

SHAPES = [(), (0,), (1,), (7,), (2, 0, 3), (4, 1, 3)]


@pytest.mark.parametrize("shape, dtype", [(s, np.uint32) for s in SHAPES] +
                         [((7,), np.uint8), ((4, 1, 3), np.uint8), ((3, 5), np.uint16)])
def test_bits_match_jax(jr, shape, dtype):
    for seed in (0, 3, 2 ** 31 - 1):
        ours = mr.bits(mr.key(seed), shape, dtype)
        assert ours.dtype == dtype and ours.shape == shape
        np.testing.assert_array_equal(ours, jr.bits(jr.key(seed), shape, dtype))


@pytest.mark.parametrize("shape", SHAPES)
def test_uniform_unit_interval_is_exact(jr, shape):
    for seed in (0, 5, 999):
        np.testing.assert_array_equal(mr.uniform(mr.key(seed), shape), jr.uniform(jr.key(seed), shape))


def test_uniform_bounds_within_rounding(jr):
    # XLA:CPU evaluates f * (max - min) + min as one FMA; meshsim rounds twice, so
    # results agree to one rounding of the bounds' magnitude.
    rng = np.random.default_rng(2)
    for seed in range(4):
        lo, hi = np.sort(np.float32(rng.normal(size=2) * 5))
        minval = np.float32(rng.normal(size=(1, 4)))
        for shape, mn, mx in [((3, 4), minval, hi + 10), ((50,), lo, hi)]:
            ours = mr.uniform(mr.key(seed), shape, minval=mn, maxval=mx)
            theirs = jr.uniform(jr.key(seed), shape, minval=mn, maxval=mx)
            scale = np.maximum(np.abs(mn), np.abs(mx))
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=2 * np.spacing(scale).max())
            assert np.all(np.asarray(ours) >= mn) and np.all(np.asarray(ours) < mx)


@pytest.mark.parametrize("shape", SHAPES)
def test_normal_matches_jax(jr, shape):
    for seed in (0, 17):
        ours = mr.normal(mr.key(seed), shape)
        assert ours.dtype == np.float32 and ours.shape == shape
        if ours.size:
            assert ulps(ours, jr.normal(jr.key(seed), shape)).max() <= NORMAL_MAX_ULP


def test_notebook_first_array(jr):
    """The notebook's first cell: x = jax.random.normal(jax.random.key(0), (1024, 4096))."""
    ours = mr.normal(mr.key(0), (1024, 4096))
    d = ulps(ours, jr.normal(jr.key(0), (1024, 4096)))
    assert d.max() <= NORMAL_MAX_ULP
    assert (d != 0).mean() < 0.05  # erf_inv's log1p/FMA rounding, see module docstring


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_randint_matches_jax(jr, dtype):
    info = np.iinfo(dtype)
    cases = [(0, 10), (-3, 3), (5, 5), (7, 2), (0, 1), (int(info.min), int(info.max)),
             (0, 256), (np.array([0, 10, 100], np.int32), 1000)]
    for minval, maxval in cases:
        if np.any(np.asarray(minval) < info.min) or np.asarray(maxval).max() > 2 ** 31 - 1:
            continue
        for shape in [(2, 3)] if np.ndim(minval) == 0 else [(4, 3)]:
            ours = mr.randint(mr.key(1), shape, minval, maxval, dtype)
            assert ours.dtype == dtype and ours.shape == shape
            np.testing.assert_array_equal(ours, jr.randint(jr.key(1), shape, minval, maxval, dtype))


def test_randint_bounds_broadcast_and_float_bounds(jr):
    mn, mx = np.array([[0], [50]], np.int32), np.array([10, 60, 1000], np.int32)
    np.testing.assert_array_equal(mr.randint(mr.key(4), (2, 3), mn, mx),
                                  jr.randint(jr.key(4), (2, 3), mn, mx))
    np.testing.assert_array_equal(mr.randint(mr.key(4), (5,), 0.5, 10.7),
                                  jr.randint(jr.key(4), (5,), 0.5, 10.7))


def test_randint_errors():
    k = mr.key(0)
    with pytest.raises(TypeError, match="randint only accepts integer dtypes"):
        mr.randint(k, (3,), 0, 10, np.float32)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        mr.randint(k, (3,), 0, np.arange(4))
    with pytest.raises(TypeError, match="ndarray or scalar"):
        mr.randint(k, (3,), [0, 1, 2], 10)


@pytest.mark.parametrize("p, shape", [(0.1, (3, 4)), (np.float32([0.2, 0.9, 0.5]), None),
                                      (np.float32([0.2, 0.9, 0.5]), (2, 3)), (0.7, ())])
@pytest.mark.parametrize("mode", ["low", "high"])
def test_bernoulli_matches_jax(jr, p, shape, mode):
    ours = mr.bernoulli(mr.key(9), p, shape, mode=mode)
    assert ours.dtype == np.bool_
    np.testing.assert_array_equal(ours, jr.bernoulli(jr.key(9), p, shape, mode=mode))


def test_bernoulli_errors():
    with pytest.raises(TypeError, match="floating dtype"):
        mr.bernoulli(mr.key(0), 1)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        mr.bernoulli(mr.key(0), np.full(4, 0.5, np.float32), (3,))
    with pytest.raises(ValueError, match="mode"):
        mr.bernoulli(mr.key(0), 0.5, mode="medium")


@pytest.mark.parametrize("x, kwargs", [
    (10, {}), (1, {}), (0, {}), (np.arange(7), {}), (np.arange(12).reshape(3, 4), {}),
    (np.arange(12).reshape(3, 4), {"axis": 1}), (np.arange(12).reshape(3, 4), {"axis": -1, "independent": True}),
    (np.arange(24, dtype=np.float32).reshape(2, 3, 4), {"axis": 2, "independent": True}),
    (1000, {}),
])
def test_permutation_matches_jax(jr, x, kwargs):
    for seed in (0, 8):
        np.testing.assert_array_equal(mr.permutation(mr.key(seed), x, **kwargs),
                                      jr.permutation(jr.key(seed), x, **kwargs))


def test_permutation_errors():
    k = mr.key(0)
    with pytest.raises(TypeError, match="integer or at least 1-dimensional"):
        mr.permutation(k, 2.5)
    with pytest.raises(ValueError, match="out of bounds"):
        mr.permutation(k, np.ones((2, 3)), axis=2)


@pytest.mark.parametrize("a, shape, kwargs", [
    (10, (3,), {}), (10, (2, 2), {"replace": False}), (np.arange(20) * 3, (5,), {}),
    (np.arange(12).reshape(3, 4), (2,), {"axis": 1, "replace": False}),
    (np.arange(12).reshape(3, 4), (2,), {"axis": 0}), (5, (0,), {}),
])
def test_choice_uniform_matches_jax(jr, a, shape, kwargs):
    np.testing.assert_array_equal(mr.choice(mr.key(2), a, shape, **kwargs),
                                  jr.choice(jr.key(2), a, shape, **kwargs))


def test_choice_errors():
    k = mr.key(0)
    with pytest.raises(TypeError, match="must be a sequence"):
        mr.choice(k, 5, 3)
    with pytest.raises(ValueError, match="larger sample"):
        mr.choice(k, 5, (6,), replace=False)
    with pytest.raises(ValueError, match="greater than 0"):
        mr.choice(k, 0, (2,))
    with pytest.raises(ValueError, match="p must be None or a 1D vector"):
        mr.choice(k, 5, (3,), p=np.ones(4, np.float32))


def test_choice_with_p_matches_jax(jr):
    p = np.float32([0.1, 0.2, 0.3, 0.15, 0.25])
    for replace in (True, False):
        np.testing.assert_array_equal(mr.choice(mr.key(3), 5, (3,), replace=replace, p=p),
                                      jr.choice(jr.key(3), 5, (3,), replace=replace, p=p))


@pytest.mark.parametrize("mode", ["low", "high"])
def test_gumbel_close_to_jax(jr, mode):
    ours = mr.gumbel(mr.key(5), (200,), mode=mode)
    np.testing.assert_allclose(ours, jr.gumbel(jr.key(5), (200,), mode=mode), rtol=2e-6, atol=1e-6)


def test_truncated_normal_close_to_jax(jr):
    ours = mr.truncated_normal(mr.key(6), -1.5, np.float32([0.5, 2.0, 3.0]), (4, 3))
    theirs = jr.truncated_normal(jr.key(6), -1.5, np.float32([0.5, 2.0, 3.0]), (4, 3))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(ours) > -1.5) and np.all(np.asarray(ours) < [0.5, 2.0, 3.0])


def test_categorical_matches_jax(jr):
    logits = np.log(np.float32([[0.1, 0.2, 0.7], [0.5, 0.4, 0.1]]))
    np.testing.assert_array_equal(mr.categorical(mr.key(0), logits, shape=(4, 2)),
                                  jr.categorical(jr.key(0), logits, shape=(4, 2)))
    np.testing.assert_array_equal(mr.categorical(mr.key(1), logits, axis=0),
                                  jr.categorical(jr.key(1), logits, axis=0))
    np.testing.assert_array_equal(mr.categorical(mr.key(2), np.zeros((2, 5), np.float32), shape=(3, 2),
                                                 replace=False),
                                  jr.categorical(jr.key(2), np.zeros((2, 5), np.float32), shape=(3, 2),
                                                 replace=False))


# -- dtype and shape errors, with JAX's exception types


@pytest.mark.parametrize("call, exc", [
    (lambda k: mr.bits(k, (3,), np.int32), ValueError),
    (lambda k: mr.bits(k, (3,), np.float32), ValueError),
    (lambda k: mr.bits(k, (2.0,)), TypeError),
    (lambda k: mr.bits(k, None), TypeError),
    (lambda k: mr.bits(k, (-1,)), TypeError),
    (lambda k: mr.uniform(k, (3,), np.int32), ValueError),
    (lambda k: mr.normal(k, (3,), np.int32), ValueError),
    (lambda k: mr.normal(k, (-2,)), TypeError),
    (lambda k: mr.uniform(k, (3,), minval=np.zeros(4, np.float32)), TypeError),
    (lambda k: mr.normal("a"), TypeError),
    (lambda k: mr.normal(mr.split(k)), ValueError),
])
def test_sampler_errors(call, exc):
    with pytest.raises(exc):
        call(mr.key(0))
