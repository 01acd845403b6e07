"""Indexing, gathers/scatters and dynamic slices vs NumPy (always) and JAX (the oracle)."""
import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
import meshsim.ops
from meshsim import lax

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.int32, np.int8, np.uint8, np.bool_]


def rand(shape, dtype=np.float32, rng=RNG):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return (rng.standard_normal(shape) * 10).astype(dtype)


def check(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    np.testing.assert_array_equal(got, want)


def random_basic_index(shape, rng):
    """A random NumPy basic index (ints, slices with any step, None, Ellipsis) valid for shape."""
    items, dims = [], list(shape)
    use_ellipsis = rng.random() < 0.3
    for i, n in enumerate(dims):
        if use_ellipsis and i == len(dims) // 2:
            items.append(Ellipsis)
            break
        r = rng.random()
        if r < 0.25 and n > 0:
            items.append(int(rng.integers(-n, n)))
        elif r < 0.35:
            items.append(None)
            items.append(slice(None))
        else:
            lo, hi = rng.integers(-n - 2, n + 3, size=2)
            step = int(rng.choice([-3, -2, -1, 1, 2, 3]))
            items.append(slice(*(None if rng.random() < 0.3 else int(v) for v in (lo, hi)), step))
    return tuple(items)


@pytest.mark.parametrize("seed", range(40))
def test_basic_indexing_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(0, 5, size=rng.integers(0, 4)))
    x = rand(shape, DTYPES[seed % len(DTYPES)], rng)
    idx = random_basic_index(shape, rng)
    check(jnp.asarray(x)[idx], x[idx])


ADVANCED = [
    (2, 3, 4), lambda: (np.array([1, 0, 1]),),
    (2, 3, 4), lambda: (slice(None), np.array([[2, 0], [1, -1]])),
    (2, 3, 4), lambda: (np.array([1, 0]), slice(None), np.array([0, 3])),  # non-adjacent: front
    (2, 3, 4), lambda: (0, slice(None), np.array([1, 2])),  # a static int counts as advanced
    (2, 3, 4), lambda: (slice(None), np.array([0, 2]), np.array([[1], [3]])),  # broadcast together
    (2, 3, 4), lambda: (np.array([0]), None, np.array([0])),
    (2, 3, 4), lambda: (Ellipsis, np.array([-4, 3])),
    (2, 3, 4), lambda: (slice(None, None, -1), np.array([2, 2, 2]), slice(1, None, 2)),
    (5,), lambda: (np.zeros((2, 0, 3), np.int32),),
    (0, 3), lambda: (slice(None), np.array([2, 0])),
    (2, 3, 4), lambda: (np.array([True, False]),),
    (2, 3, 4), lambda: (slice(None), np.array([[True, False, True, True]] * 3)),
    (2, 3, 4), lambda: (True,),
    (2, 3, 4), lambda: (slice(None), False),
    (2, 3, 4), lambda: (1, [0, 2], None),
]


@pytest.mark.parametrize("case", range(len(ADVANCED) // 2))
def test_advanced_indexing_matches_numpy(case):
    shape, make_idx = ADVANCED[2 * case], ADVANCED[2 * case + 1]
    for dtype in (np.float32, np.int8, np.bool_):
        x = rand(shape, dtype)
        idx = make_idx()
        check(jnp.asarray(x)[idx], x[idx])
        # the same with meshsim index arrays
        idx = tuple(jnp.asarray(i) if isinstance(i, np.ndarray) else i for i in idx)
        check(jnp.asarray(x)[idx], x[tuple(np.asarray(i) if isinstance(i, jax.Array) else i for i in idx)])


def test_out_of_range_indices_are_clamped_like_jax(real_jax):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    idx = np.array([7, -7, -1, 3, 100])
    check(jnp.asarray(x)[idx, 0], np.asarray(real_jax.numpy.asarray(x)[idx, 0]))
    check(jnp.asarray(x)[:, idx], np.asarray(real_jax.numpy.asarray(x)[:, idx]))
    check(jnp.asarray(x)[9], np.asarray(real_jax.numpy.asarray(x)[9]))  # static ints clamp too
    check(jnp.asarray(x)[-9, 1], np.asarray(real_jax.numpy.asarray(x)[-9, 1]))


def test_traced_scalar_index_is_a_dynamic_slice():
    x = rand((4, 3))
    f = jax.jit(lambda x, i: x[i, 1:])
    for i in range(-6, 7):
        check(f(x, np.int32(i)), x[min(max(i + 4 if i < 0 else i, 0), 3), 1:])
    assert "dynamic_slice" in str(jax.make_jaxpr(lambda x, i: x[i])(x, np.int32(1)))
    g = jax.jit(lambda x, i: x[i])
    check(g(x, np.array([3, -1, 0], np.int32)), x[[3, -1, 0]])


def test_index_errors():
    x = jnp.asarray(rand((2, 3)))
    with pytest.raises(IndexError, match="Too many indices"):
        x[0, 1, 2]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(TypeError, match="integer or boolean"):
        x[1.0]
    with pytest.raises(TypeError, match="integer or boolean"):
        x[np.array([0.5])]
    with pytest.raises(TypeError, match="non-tuple sequence"):
        x[[0, 1]]
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[np.array([True, False, True])]
    with pytest.raises(IndexError, match="must be concrete"):
        jax.jit(lambda x: x[x > 0])(x)
    with pytest.raises(IndexError, match="static start/stop/step"):
        jax.jit(lambda x, i: x[i:])(x, np.int32(1))
    with pytest.raises(ValueError, match="Incompatible shapes"):
        x[np.array([0, 1]), np.array([0, 1, 2])]


# ---------------------------------------------------------------- .at[]

AT_OPS = {"set": None, "add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


@pytest.mark.parametrize("op", list(AT_OPS))
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_at_with_duplicate_indices_matches_numpy(op, dtype):
    rng = np.random.default_rng(1)
    x = rand((6, 3), dtype, rng)
    idx = rng.integers(-6, 6, size=10)  # many duplicates
    v = rand((10, 3), dtype, rng)
    want = x.copy()
    if op == "set":
        want[idx] = v  # NumPy: the last update wins, as in meshsim's serial scatter
    else:
        AT_OPS[op].at(want, idx, v)
    check(getattr(jnp.asarray(x).at[idx], op)(v), want)


@pytest.mark.parametrize("seed", range(15))
def test_at_set_and_add_with_basic_and_mixed_indices(seed):
    rng = np.random.default_rng(100 + seed)
    shape = tuple(rng.integers(1, 5, size=rng.integers(1, 4)))
    x = rand(shape, np.float32, rng)
    idx = random_basic_index(shape, rng)
    if seed % 3 == 0 and len(shape) > 1:  # an integer array on a middle axis
        idx = (slice(None), rng.integers(0, shape[1], size=3)) + random_basic_index(shape[2:], rng)
    want = x.copy()
    v = rand(want[idx].shape, np.float32, rng)
    want[idx] = v
    check(jnp.asarray(x).at[idx].set(v), want)
    want = x.copy()
    want[idx] += 2.0
    if not isinstance(idx, tuple) or not any(isinstance(i, np.ndarray) for i in idx):
        check(jnp.asarray(x).at[idx].add(2.0), want)


def test_at_out_of_bounds_and_modes_like_jax(real_jax):
    rjnp = real_jax.numpy
    x = np.arange(5, dtype=np.float32)
    idx = np.array([7, -7, -1, 2, 2])
    for op in ("set", "add", "multiply", "min", "max"):
        for mode in (None, "clip", "drop"):
            got = getattr(jnp.asarray(x).at[idx], op)(10.0, mode=mode)
            check(got, np.asarray(getattr(rjnp.asarray(x).at[idx], op)(10.0, mode=mode)))
    check(jnp.asarray(x).at[7].add(1.0), np.asarray(rjnp.asarray(x).at[7].add(1.0)))
    for mode, fill in ((None, None), ("clip", None), ("fill", None), ("fill", -1.0)):
        check(jnp.asarray(x).at[idx].get(mode=mode, fill_value=fill),
              np.asarray(rjnp.asarray(x).at[idx].get(mode=mode, fill_value=fill)))


def test_at_misc():
    x = rand((3, 4))
    want = x.copy()
    want[1] -= 1.0
    check(jnp.asarray(x).at[1].subtract(1.0), want)
    check(jnp.asarray(np.float32(2)).at[()].add(3.0), np.float32(5))
    check(jnp.asarray(x).at[...].set(0.0), np.zeros_like(x))
    check(jnp.asarray(x).at[None, 1, 2].set(0.0), np.where((np.arange(12) == 6).reshape(3, 4), 0, x))
    i = np.array([2, 0], np.int32)
    got = jax.jit(lambda x, i: x.at[i].add(1.0))(x, i)
    want = x.copy()
    want[i] += 1
    check(got, want)
    y = jnp.asarray(np.arange(4, dtype=np.int32)).at[1].set(2.7)  # values take x's dtype
    check(y, np.array([0, 2, 2, 3], np.int32))
    with pytest.raises(ValueError, match="broadcast"):
        jnp.asarray(x).at[0].set(np.ones(3, np.float32))


# ---------------------------------------------------------------- take & co.

@pytest.mark.parametrize("seed", range(12))
def test_take_matches_numpy(seed):
    rng = np.random.default_rng(200 + seed)
    shape = tuple(rng.integers(1, 5, size=rng.integers(1, 4)))
    x = rand(shape, DTYPES[seed % len(DTYPES)], rng)
    axis = None if seed % 4 == 0 else int(rng.integers(-len(shape), len(shape)))
    n = x.size if axis is None else shape[axis]
    idx = rng.integers(-n, n, size=tuple(rng.integers(0, 4, size=rng.integers(0, 3))))
    check(jnp.take(x, idx, axis=axis), np.take(x, idx, axis=axis))
    check(jnp.asarray(x).take(idx, axis=axis), np.take(x, idx, axis=axis))


def test_take_modes_like_jax(real_jax):
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    idx = np.array([[-1, -7], [7, 2]])
    for kw in ({}, {"mode": "fill"}, {"mode": "fill", "fill_value": 3}, {"mode": "clip"}, {"mode": "wrap"}):
        check(jnp.take(x, idx, axis=1, **kw), np.asarray(real_jax.numpy.take(x, idx, axis=1, **kw)))
    xi = x.astype(np.int32)
    check(jnp.take(xi, idx, axis=1), np.asarray(real_jax.numpy.take(xi, idx, axis=1)))
    with pytest.raises(NotImplementedError):
        jnp.take(x, idx, mode="raise")
    with pytest.raises(ValueError, match="Invalid mode"):
        jnp.take(x, idx, mode="bogus")
    with pytest.raises(TypeError, match="integer"):
        jnp.take(x, np.array([0.5]))


@pytest.mark.parametrize("seed", range(8))
def test_take_along_axis_matches_numpy(seed):
    rng = np.random.default_rng(300 + seed)
    shape = tuple(rng.integers(1, 5, size=rng.integers(1, 4)))
    x = rand(shape, np.float32, rng)
    axis = int(rng.integers(-len(shape), len(shape)))
    idx = np.argsort(x, axis=axis)
    check(jnp.take_along_axis(x, idx, axis), np.take_along_axis(x, idx, axis))
    # indices broadcast against arr along the other dims
    small = idx.take([0], axis=(axis + 1) % len(shape)) if len(shape) > 1 else idx
    check(jnp.take_along_axis(x, small, axis), np.take_along_axis(x, small, axis))
    check(jnp.take_along_axis(x, np.zeros_like(x, np.int32).ravel()[:1], None),
          np.take_along_axis(x, np.zeros(1, np.int64), None))


def test_take_along_axis_modes_like_jax(real_jax):
    x = np.arange(5, dtype=np.float32)
    i = np.array([-1, -7, 7])
    for mode in (None, "clip", "fill", "promise_in_bounds"):
        check(jnp.take_along_axis(x, i, 0, mode=mode),
              np.asarray(real_jax.numpy.take_along_axis(x, i, 0, mode=mode)))
    with pytest.raises(ValueError, match="same number of dimensions"):
        jnp.take_along_axis(np.ones((2, 2)), np.zeros(2, np.int32), 0)


def test_put_along_axis():
    x = rand((3, 4))
    idx = np.argmax(x, axis=1)[:, None]
    want = x.copy()
    np.put_along_axis(want, idx, 0.0, axis=1)
    check(jnp.put_along_axis(x, idx, 0.0, axis=1, inplace=False), want)
    with pytest.raises(ValueError, match="inplace"):
        jnp.put_along_axis(x, idx, 0.0, axis=1)


# ---------------------------------------------------------------- dynamic slices

def test_dynamic_slice_clamps_like_jax(real_jax):
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    for start in [(0, 0), (4, 5), (-1, 2), (-9, -1), (3, 100)]:
        want = real_jax.lax.dynamic_slice(x, start, (3, 2))
        check(lax.dynamic_slice(x, start, (3, 2)), np.asarray(want))
        check(jax.jit(lambda x, s: lax.dynamic_slice(x, s, (3, 2)))(x, np.array(start, np.int32)), np.asarray(want))
        upd = np.full((2, 4), -1, np.float32)
        check(lax.dynamic_update_slice(x, upd, start),
              np.asarray(real_jax.lax.dynamic_update_slice(x, upd, start)))
    check(lax.dynamic_slice_in_dim(x, -2, 2, axis=1), x[:, 4:6])
    check(lax.dynamic_index_in_dim(x, 1, axis=1, keepdims=False), x[:, 1])
    check(lax.dynamic_update_slice_in_dim(x, np.zeros((5, 1), np.float32), 9, axis=1),
          np.concatenate([x[:, :5], np.zeros((5, 1), np.float32)], 1))
    check(lax.dynamic_update_index_in_dim(x, np.zeros(6, np.float32), 0, 0),
          np.concatenate([np.zeros((1, 6), np.float32), x[1:]]))
    check(lax.dynamic_slice(np.zeros((0, 3)), (0, 1), (0, 2)), np.zeros((0, 2), np.float32))


def test_dynamic_slice_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError, match="slice_sizes"):
        lax.dynamic_slice(x, (0, 0), (4, 1))
    with pytest.raises(TypeError, match="start_indices"):
        lax.dynamic_slice(x, (0,), (1, 1))
    with pytest.raises(TypeError, match="integer scalars"):
        lax.dynamic_slice(x, (0.5, 0), (1, 1))
    with pytest.raises(TypeError, match="dtype"):
        lax.dynamic_update_slice(x, np.ones((1, 1), np.int32), (0, 0))


# ---------------------------------------------------------------- nonzero, bincount, select, diagonal

@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 4), (2, 0, 3), (2, 3, 2)])
def test_nonzero_family_matches_numpy(shape):
    x = (RNG.integers(0, 3, size=shape) * (RNG.random(shape) < 0.5)).astype(np.int32)
    for got, want in zip(jnp.nonzero(x), np.nonzero(x)):
        check(got, want.astype(np.int32))
    check(jnp.argwhere(x), np.argwhere(x).astype(np.int32))
    check(jnp.flatnonzero(x), np.flatnonzero(x).astype(np.int32))
    for got, want in zip(jnp.where(x > 0), np.where(x > 0)):
        check(got, want.astype(np.int32))


def test_nonzero_with_size_like_jax(real_jax):
    x = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    for size, fill in ((2, None), (6, None), (5, -1), (4, (7, 8))):
        want = real_jax.numpy.nonzero(x, size=size, fill_value=fill)
        for got, w in zip(jnp.nonzero(x, size=size, fill_value=fill), want):
            check(got, np.asarray(w))
        traced = jax.jit(lambda x: jnp.nonzero(x, size=size, fill_value=fill))(x)
        for got, w in zip(traced, want):
            check(got, np.asarray(w))
    check(jax.jit(lambda x: jnp.argwhere(x, size=4))(x), np.asarray(real_jax.numpy.argwhere(x, size=4)))
    with pytest.raises(TypeError, match="size"):
        jax.jit(jnp.nonzero)(x)
    with pytest.raises(ValueError, match="0d"):
        jnp.nonzero(np.float32(1))


def test_bincount_matches_numpy_and_jax(real_jax):
    x = RNG.integers(0, 6, size=20).astype(np.int32)
    w = rand(20, np.float32)
    check(jnp.bincount(x), np.bincount(x).astype(np.int32))
    check(jnp.bincount(x, minlength=10), np.bincount(x, minlength=10).astype(np.int32))
    check(jnp.bincount(x, weights=w), np.bincount(x, weights=w).astype(np.float32))
    check(jnp.bincount(np.zeros(0, np.int32)), np.zeros(0, np.int32))
    neg = np.array([0, -1, 1, 5], np.int32)
    check(jnp.bincount(neg, length=3), np.asarray(real_jax.numpy.bincount(neg, length=3)))
    check(jax.jit(lambda x: jnp.bincount(x, length=8))(x), np.bincount(x, minlength=8).astype(np.int32))
    with pytest.raises(TypeError, match="length"):
        jax.jit(jnp.bincount)(x)
    with pytest.raises(TypeError, match="integer"):
        jnp.bincount(w)
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.bincount(x.reshape(4, 5))


def test_select_matches_numpy():
    x = rand((3, 4))
    conds = [x > 5, x < -5]
    choices = [x * 0 + 1, np.float32(-1) + x * 0]
    check(jnp.select(conds, choices, default=7.0), np.select(conds, choices, default=7.0).astype(np.float32))
    check(jnp.select([x > 0], [np.int32(3)]), np.select([x > 0], [np.int32(3)]).astype(np.int32))
    with pytest.raises(ValueError, match="equal to choicelist"):
        jnp.select(conds, choices[:1])


@pytest.mark.parametrize("shape,offset,a1,a2", [((3, 4), 0, 0, 1), ((3, 4), 2, 0, 1), ((3, 4), -1, 1, 0),
                                                ((2, 3, 4), 1, 0, 2), ((2, 3, 4), -2, -1, -2), ((3, 3), 9, 0, 1)])
def test_diagonal_matches_numpy(shape, offset, a1, a2):
    x = rand(shape)
    check(jnp.diagonal(x, offset, a1, a2), np.diagonal(x, offset, a1, a2))


# ---------------------------------------------------------------- segment ops

@pytest.mark.parametrize("name", ["segment_sum", "segment_prod", "segment_max", "segment_min"])
def test_segment_ops_match_jax(name, real_jax):
    data = rand((9, 3))
    ids = np.array([0, 2, 2, -1, 5, 1, 0, 3, 2], np.int32)  # a negative and an out-of-range id
    got = getattr(meshsim.ops, name)(data, ids, num_segments=4)
    check(got, np.asarray(getattr(real_jax.ops, name)(data, ids, num_segments=4)))
    got = jax.jit(lambda d, i: getattr(meshsim.ops, name)(d, i, num_segments=4))(data, ids)
    check(got, np.asarray(getattr(real_jax.ops, name)(data, ids, num_segments=4)))


def test_segment_sum_infers_num_segments():
    data = np.arange(6, dtype=np.int32)
    ids = np.array([0, 0, 1, 3, 3, 3], np.int32)
    check(meshsim.ops.segment_sum(data, ids), np.array([1, 2, 0, 12], np.int32))
    with pytest.raises(TypeError, match="num_segments"):
        jax.jit(meshsim.ops.segment_sum)(data, ids)
