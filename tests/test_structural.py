"""Shape manipulation: the structural lax primitives and meshsim.numpy's shape,
join, split, repeat, pad, flip and roll functions, against NumPy and JAX."""
import numpy as np
import pytest

import meshsim as mjax
import meshsim.lax as lax
import meshsim.numpy as jnp

jax = pytest.importorskip("jax")
jjnp = jax.numpy

DTYPES = [np.float32, np.int32, np.bool_, np.int8, np.uint8, np.uint32]


def rand(rng, shape, dtype=np.float32):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def rand_shape(rng, ndim, low=0, high=4):
    return tuple(int(d) for d in rng.integers(low, high + 1, ndim))


def check(actual, expected):
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(np.asarray(actual), expected)


def same_type_as_jax(ours, theirs):
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype
    assert ours.weak_type == theirs.weak_type, (ours, theirs)


# --- lax primitives ----------------------------------------------------------

def np_pad(x, value, config):
    """lax.pad semantics in NumPy: interior dilation, then low/high pad or crop."""
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        size = n + max(n - 1, 0) * interior
        shape = list(x.shape)
        shape[axis] = size
        dilated = np.full(shape, value, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(0, size, interior + 1)
        dilated[tuple(idx)] = x
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        x = np.pad(dilated, widths, constant_values=value)
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(max(-lo, 0), x.shape[axis] - max(-hi, 0))
        x = x[tuple(idx)]
    return x


@pytest.mark.parametrize("seed", range(12))
def test_lax_pad_matches_numpy_and_jax(seed):
    rng = np.random.default_rng(seed)
    dtype = DTYPES[seed % len(DTYPES)]
    shape = rand_shape(rng, seed % 4)
    x = rand(rng, shape, dtype)
    config = []
    for n in shape:
        interior = int(rng.integers(0, 3))
        size = n + max(n - 1, 0) * interior
        lo = int(rng.integers(-size, 3)) if size else int(rng.integers(0, 3))
        hi = int(rng.integers(-(size + lo), 3)) if size + lo > 0 else int(rng.integers(0, 3))
        config.append((lo, hi, interior))
    value = rand(rng, (), dtype)
    out = lax.pad(x, value, config)
    check(out, np_pad(x, value, config))
    check(out, jax.lax.pad(x, value, config))


def test_lax_pad_errors_and_weak_type():
    x = jnp.ones((2, 3))
    with pytest.raises(TypeError, match="same dtype"):
        lax.pad(x, np.int32(0), [(1, 1, 0)] * 2)
    with pytest.raises(ValueError, match="length of padding_config"):
        lax.pad(x, np.float32(0), [(1, 1, 0)])
    with pytest.raises(ValueError, match="interior padding"):
        lax.pad(x, np.float32(0), [(1, 1, -1), (0, 0, 0)])
    with pytest.raises(ValueError, match="not at least 0"):
        lax.pad(x, np.float32(0), [(-2, -1, 0), (0, 0, 0)])
    weak = lax.full((2,), 1.0)
    same_type_as_jax(lax.pad(weak, 0.0, [(1, 1, 0)]), jax.lax.pad(jax.lax.full((2,), 1.0), 0.0, [(1, 1, 0)]))
    check(lax.pad(jnp.float32(2), np.float32(0), []), np.float32(2))


@pytest.mark.parametrize("seed", range(10))
def test_lax_slice_rev_squeeze(seed):
    rng = np.random.default_rng(seed)
    shape = rand_shape(rng, 1 + seed % 4)
    x = rand(rng, shape, DTYPES[seed % len(DTYPES)])
    start = [int(rng.integers(0, n + 1)) for n in shape]
    limit = [int(rng.integers(s, n + 1)) for s, n in zip(start, shape)]
    strides = [int(rng.integers(1, 4)) for _ in shape]
    sl = tuple(slice(s, l, st) for s, l, st in zip(start, limit, strides))
    check(lax.slice(x, start, limit, strides), x[sl])
    check(lax.slice(x, start, limit), x[tuple(slice(s, l) for s, l in zip(start, limit))])
    dims = tuple(int(d) for d in rng.permutation(len(shape))[: int(rng.integers(0, len(shape) + 1))])
    check(lax.rev(x, dims), np.flip(x, dims) if dims else x)
    # Slicing a reversed (negative-stride) view.
    check(lax.slice(lax.rev(x, dims), start, limit, strides), (np.flip(x, dims) if dims else x)[sl])
    ones = tuple(1 if rng.random() < 0.5 else n for n in shape)
    y = rand(rng, ones)
    dims1 = tuple(i for i, n in enumerate(ones) if n == 1)
    check(lax.squeeze(y, dims1), np.squeeze(y, dims1) if dims1 else y)


def test_lax_slice_errors():
    x = jnp.ones((4, 3))
    with pytest.raises(TypeError, match="limit_indices must be less than or equal"):
        lax.slice(x, (0, 0), (5, 3))
    with pytest.raises(TypeError, match="start_indices must be greater than or equal to zero"):
        lax.slice(x, (-1, 0), (2, 3))
    with pytest.raises(TypeError, match="greater than or equal to start_indices"):
        lax.slice(x, (3, 0), (2, 3))
    with pytest.raises(TypeError, match="length equal to the number of dimensions"):
        lax.slice(x, (0,), (2,))
    with pytest.raises(TypeError, match="strides must be positive"):
        lax.slice(x, (0, 0), (2, 3), (0, 1))
    with pytest.raises(TypeError, match="rev dimensions must be unique"):
        lax.rev(x, (0, 0))
    with pytest.raises(TypeError, match="less than operand ndim"):
        lax.rev(x, (2,))
    with pytest.raises(ValueError, match="size not equal to one"):
        lax.squeeze(x, (0,))
    with pytest.raises(ValueError, match="out of bounds"):
        lax.squeeze(x, (2,))


@pytest.mark.parametrize("seed", range(8))
def test_lax_concatenate(seed):
    rng = np.random.default_rng(seed)
    ndim = 1 + seed % 3
    dim = int(rng.integers(0, ndim))
    base = rand_shape(rng, ndim)
    dtype = DTYPES[seed % len(DTYPES)]
    xs = []
    for _ in range(int(rng.integers(2, 5))):
        shape = list(base)
        shape[dim] = int(rng.integers(0, 4))
        xs.append(rand(rng, shape, dtype))
    # Non-contiguous operands (transposed / broadcast views) are copied correctly too.
    views = [lax.transpose(lax.transpose(jnp.asarray(x), tuple(reversed(range(ndim)))),
                           tuple(reversed(range(ndim)))) for x in xs]
    check(lax.concatenate(xs, dim), np.concatenate(xs, dim))
    check(lax.concatenate(views, dim), np.concatenate(xs, dim))
    bcast = lax.broadcast_in_dim(np.float32(7), (2, 3), ())
    check(lax.concatenate([bcast, jnp.zeros((2, 3))], 1), np.concatenate([np.full((2, 3), 7, np.float32),
                                                                           np.zeros((2, 3), np.float32)], 1))


def test_lax_concatenate_errors_and_weak_type():
    with pytest.raises(TypeError, match="different numbers of dimensions"):
        lax.concatenate([jnp.ones((2, 3)), jnp.ones((3,))], 0)
    with pytest.raises(TypeError, match="differ in dimensions other than"):
        lax.concatenate([jnp.ones((2, 3)), jnp.ones((2, 4))], 0)
    with pytest.raises(TypeError, match="same dtypes"):
        lax.concatenate([jnp.ones((2,)), jnp.ones((2,), jnp.int32)], 0)
    with pytest.raises(TypeError, match="dimension out of bounds"):
        lax.concatenate([jnp.ones((2,)), jnp.ones((2,))], 1)
    with pytest.raises(ValueError, match="non-empty"):
        lax.concatenate([], 0)
    w = lax.full((2,), 1.0)
    same_type_as_jax(lax.concatenate([w, w], 0), jax.lax.concatenate([jax.lax.full((2,), 1.0)] * 2, 0))
    same_type_as_jax(lax.concatenate([w, jnp.ones(2)], 0),
                     jax.lax.concatenate([jax.lax.full((2,), 1.0), jjnp.ones(2)], 0))


def test_lax_shape_wrappers_match_jax():
    rng = np.random.default_rng(0)
    x = rand(rng, (2, 1, 3))
    cases = [
        ("broadcast", lambda m: m.broadcast(x, (4,))),
        ("broadcast_in_dim", lambda m: m.broadcast_in_dim(x, (2, 5, 3), (0, 1, 2))),
        ("reshape_dims", lambda m: m.reshape(x, (3, 2), (2, 1, 0))),
        ("expand_dims", lambda m: m.expand_dims(x, (0, -1))),
        ("squeeze_neg", lambda m: m.squeeze(x, (-2,))),
        ("collapse", lambda m: m.collapse(x, 1)),
        ("collapse2", lambda m: m.collapse(x, 0, 2)),
        ("slice_in_dim", lambda m: m.slice_in_dim(x, -2, None, 1, 0)),
        ("slice_in_dim_stride", lambda m: m.slice_in_dim(x, 0, 3, 2, 2)),
        ("index_in_dim", lambda m: m.index_in_dim(x, -1, 2, keepdims=False)),
        ("broadcasted_iota", lambda m: m.broadcasted_iota(np.int32, (2, 3), 1)),
        ("iota", lambda m: m.iota(np.float32, 4)),
        ("full", lambda m: m.full((2, 2), 3)),
        ("full_dtype", lambda m: m.full((2,), 3, np.float32)),
        ("full_like", lambda m: m.full_like(x, 2)),
        ("full_like_shape", lambda m: m.full_like(x, 2, np.int32, (4,))),
        ("transpose", lambda m: m.transpose(x, (2, 0, 1))),
    ]
    for name, f in cases:
        ours, theirs = f(lax), f(jax.lax)
        same_type_as_jax(ours, theirs)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=name)
    with pytest.raises(TypeError, match="nonnegative"):
        lax.broadcast_in_dim(x, (2, -1, 3), (0, 1, 2))
    with pytest.raises(ValueError, match="repeated axis"):
        lax.expand_dims(x, (0, 0))


def test_lax_copy_makes_fresh_buffer_and_is_recorded():
    x = jnp.arange(6.0)
    y = lax.copy(x)
    check(y, np.arange(6, dtype=np.float32))
    assert "copy" in str(mjax.make_jaxpr(lambda a: jnp.array(a, copy=True))(x))


def test_views_do_not_corrupt_their_source():
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = jnp.asarray(base)
    views = [lax.slice(x, (0, 1, 0), (2, 3, 4), (1, 1, 2)), lax.rev(x, (1, 2)),
             lax.squeeze(lax.slice(x, (0, 0, 0), (1, 3, 4)), (0,)), jnp.transpose(x),
             jnp.broadcast_to(lax.slice(x, (0, 0, 0), (1, 1, 4)), (5, 3, 4))]
    for v in views:
        expected = np.asarray(v).copy()
        out = v * 2 + 1
        np.testing.assert_array_equal(np.asarray(out), expected * 2 + 1)
        np.testing.assert_array_equal(np.asarray(v), expected)
    np.testing.assert_array_equal(np.asarray(x), base)
    # A padded / concatenated result does not alias its inputs.
    p = jnp.pad(x, 1)
    np.testing.assert_array_equal(np.asarray(p)[1:-1, 1:-1, 1:-1], base)


# --- numpy: reshaping --------------------------------------------------------

@pytest.mark.parametrize("seed", range(10))
def test_reshape_transpose_family(seed):
    rng = np.random.default_rng(seed)
    shape = rand_shape(rng, seed % 4 + 1, 0 if seed % 3 == 0 else 1)
    x = rand(rng, shape, DTYPES[seed % len(DTYPES)])
    size = x.size
    target = (size,) if size == 0 else (-1, shape[-1]) if shape else (1,)
    check(jnp.reshape(x, target), np.reshape(x, target))
    check(jnp.reshape(x, target, order="F"), np.reshape(x, target, order="F"))
    check(jnp.ravel(x), np.ravel(x))
    check(jnp.ravel(x, order="F"), np.ravel(x, order="F"))
    check(jnp.transpose(x), np.transpose(x))
    perm = tuple(int(i) - x.ndim for i in rng.permutation(x.ndim))  # negative axes
    check(jnp.transpose(x, perm), np.transpose(x, perm))
    check(jnp.permute_dims(x, perm), np.transpose(x, perm))
    a, b = int(rng.integers(-x.ndim, x.ndim)), int(rng.integers(-x.ndim, x.ndim))
    check(jnp.swapaxes(x, a, b), np.swapaxes(x, a, b))
    check(jnp.moveaxis(x, a, b), np.moveaxis(x, a, b))
    if x.ndim >= 2:
        check(jnp.moveaxis(x, (0, 1), (-1, 0)), np.moveaxis(x, (0, 1), (-1, 0)))
        check(jnp.matrix_transpose(x), np.swapaxes(x, -1, -2))
    check(jnp.expand_dims(x, -1), np.expand_dims(x, -1))
    check(jnp.expand_dims(x, (0, 2)), np.expand_dims(x, (0, 2)))
    y = x.reshape(tuple(1 if i % 2 else d for i, d in enumerate(shape))) if size == np.prod(
        [1 if i % 2 else d for i, d in enumerate(shape)]) else x
    check(jnp.squeeze(y), np.squeeze(y))
    assert jnp.ndim(x) == x.ndim and jnp.shape(x) == x.shape and jnp.size(x) == x.size
    assert jnp.size(x, -1) == x.shape[-1]


def test_reshape_errors_match_jax():
    x = jnp.ones((2, 3))
    with pytest.raises(TypeError, match=r"cannot reshape array of shape \(2, 3\) \(size 6\) into shape \(4, 2\)"):
        jnp.reshape(x, (4, 2))
    with pytest.raises(TypeError, match="only specify one unknown axis"):
        jnp.reshape(x, (-1, -1))
    with pytest.raises(TypeError, match="does not evenly divide 6"):
        jnp.reshape(x, (4, -1))
    with pytest.raises(TypeError, match="isn't a permutation"):
        jnp.transpose(x, (0, 0))
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        jnp.transpose(x, (0, 2))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.expand_dims(x, 3)
    with pytest.raises(ValueError, match="size not equal to one"):
        jnp.squeeze(x, 0)
    with pytest.raises(ValueError, match="Inconsistent number of elements"):
        jnp.moveaxis(x, (0, 1), (0,))


def test_broadcasting_functions():
    rng = np.random.default_rng(1)
    x = rand(rng, (3, 1))
    check(jnp.broadcast_to(x, (2, 3, 4)), np.broadcast_to(x, (2, 3, 4)))
    check(jnp.broadcast_to(np.float32(2), 3), np.broadcast_to(np.float32(2), 3))
    outs = jnp.broadcast_arrays(x, np.ones((4,), np.int32), 2.0)
    for o, e in zip(outs, np.broadcast_arrays(x, np.ones((4,), np.int32), np.float32(2.0))):
        check(o, e)
    assert jnp.broadcast_shapes((3, 1), (4,), ()) == (3, 4)
    assert jnp.broadcast_shapes((0, 1), 5) == (0, 5)
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        jnp.broadcast_shapes((2,), (3,))
    with pytest.raises(ValueError, match="broadcast"):
        jnp.broadcast_to(x, (2, 4, 1))
    with pytest.raises(ValueError, match="fewer dimensions"):
        jnp.broadcast_to(x, (3,))
    for n in range(4):
        y = rand(rng, (2,) * n)
        for ours, theirs in ((jnp.atleast_1d, np.atleast_1d), (jnp.atleast_2d, np.atleast_2d),
                             (jnp.atleast_3d, np.atleast_3d)):
            check(ours(y), theirs(y))
    a, b = jnp.atleast_2d(1.0, np.ones(3))
    assert a.shape == (1, 1) and b.shape == (1, 3)
    same_type_as_jax(jnp.atleast_1d(3.0), jjnp.atleast_1d(3.0))


# --- numpy: joining and splitting --------------------------------------------

@pytest.mark.parametrize("seed", range(10))
def test_concatenate_and_stack(seed):
    rng = np.random.default_rng(seed)
    ndim = 1 + seed % 3
    shape = rand_shape(rng, ndim)
    axis = int(rng.integers(-ndim, ndim))
    dtypes = [DTYPES[(seed + i) % len(DTYPES)] for i in range(3)]
    xs = [rand(rng, shape, d) for d in dtypes]
    check(jnp.concatenate(xs, axis), jjnp.concatenate(xs, axis))
    check(jnp.concatenate(xs, None), jjnp.concatenate(xs, None))
    check(jnp.concat(xs, axis=axis), jjnp.concat(xs, axis=axis))
    check(jnp.concatenate(xs, axis, dtype=np.float32), np.concatenate(xs, axis, dtype=np.float32))
    stack_axis = int(rng.integers(-ndim - 1, ndim + 1))
    check(jnp.stack(xs, stack_axis), jjnp.stack(xs, stack_axis))
    for ours, theirs in ((jnp.hstack, jjnp.hstack), (jnp.vstack, jjnp.vstack),
                         (jnp.dstack, jjnp.dstack), (jnp.column_stack, jjnp.column_stack)):
        check(ours(xs), theirs(xs))
    check(jnp.stack(jnp.asarray(xs[0]), 0), np.stack(list(xs[0]), 0) if shape[0] else xs[0])


def test_join_dtypes_and_errors_match_jax():
    w = lax.full((2,), 1.0)
    jw = jax.lax.full((2,), 1.0)
    same_type_as_jax(jnp.concatenate([w, jnp.ones(2, jnp.int32)]),
                     jjnp.concatenate([jw, jjnp.ones(2, jjnp.int32)]))
    same_type_as_jax(jnp.stack([1, 2.0]), jjnp.stack([1, 2.0]))
    same_type_as_jax(jnp.stack([w, w]), jjnp.stack([jw, jw]))
    with pytest.raises(ValueError, match="Need at least one array to concatenate"):
        jnp.concatenate([])
    with pytest.raises(ValueError, match="Need at least one array to stack"):
        jnp.stack([])
    with pytest.raises(ValueError, match="same shape"):
        jnp.stack([jnp.ones((2, 3)), jnp.ones((3, 2))])
    with pytest.raises(TypeError, match="differ in dimensions other than"):
        jnp.concatenate([jnp.ones((2, 3)), jnp.ones((3, 3))], axis=1)
    with pytest.raises(TypeError, match="different numbers of dimensions"):
        jnp.concatenate([jnp.ones((2, 3)), jnp.ones((3,))])
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.concatenate([jnp.ones((2, 3))] * 2, axis=2)
    with pytest.raises(ValueError, match="Zero-dimensional"):
        jnp.concatenate([1.0, 2.0])


@pytest.mark.parametrize("seed", range(8))
def test_split_family(seed):
    rng = np.random.default_rng(seed)
    ndim = 1 + seed % 3
    shape = list(rand_shape(rng, ndim, 1, 5))
    axis = int(rng.integers(-ndim, ndim))
    sections = int(rng.integers(1, 4))
    shape[axis] = sections * int(rng.integers(0, 3))
    x = rand(rng, shape, DTYPES[seed % len(DTYPES)])
    for ours, theirs in zip(jnp.split(x, sections, axis), np.split(x, sections, axis)):
        check(ours, theirs)
    points = sorted(int(i) for i in rng.integers(0, shape[axis] + 2, 3))
    for ours, theirs in zip(jnp.split(x, points, axis), np.split(x, points, axis)):
        check(ours, theirs)
    y = rand(rng, [7 if i == axis % ndim else d for i, d in enumerate(shape)])
    for n in (1, 3, 4, 9):
        parts = jnp.array_split(y, n, axis)
        assert len(parts) == n
        for ours, theirs in zip(parts, np.array_split(y, n, axis)):
            check(ours, theirs)
    if ndim >= 2:
        for ours, theirs in zip(jnp.hsplit(y, [1]), np.hsplit(y, [1])):
            check(ours, theirs)
        for ours, theirs in zip(jnp.vsplit(y, [1]), np.vsplit(y, [1])):
            check(ours, theirs)
    with pytest.raises(ValueError, match="array split does not result in an equal division"):
        jnp.split(np.ones(7), 2)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.split(x, 1, axis=ndim)
    assert [u.tolist() for u in jnp.unstack(np.eye(2))] == [[1, 0], [0, 1]]


# --- numpy: repeat, tile, pad ------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_repeat_and_tile(seed):
    rng = np.random.default_rng(seed)
    ndim = seed % 3 + 1
    shape = rand_shape(rng, ndim)
    x = rand(rng, shape, DTYPES[seed % len(DTYPES)])
    axis = int(rng.integers(-ndim, ndim))
    r = int(rng.integers(0, 4))
    check(jnp.repeat(x, r, axis), np.repeat(x, r, axis))
    check(jnp.repeat(x, r), np.repeat(x, r))
    counts = rng.integers(0, 3, shape[axis])
    check(jnp.repeat(x, counts, axis), np.repeat(x, counts, axis))
    check(jnp.repeat(x, jnp.asarray(counts), axis), np.repeat(x, counts, axis))
    reps = tuple(int(v) for v in rng.integers(0, 3, int(rng.integers(1, 4))))
    check(jnp.tile(x, reps), np.tile(x, reps))
    check(jnp.tile(x, 2), np.tile(x, 2))
    check(jnp.repeat(np.float32(3), 4), np.repeat(np.float32(3), 4))


def test_repeat_with_total_repeat_length_and_under_jit():
    if not all(hasattr(jnp, f) for f in ("cumsum", "sum", "take")):
        pytest.skip("needs jnp.cumsum, jnp.sum and jnp.take")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    counts = np.array([2, 0, 3])
    expected = np.repeat(x, counts, 0)
    check(jnp.repeat(x, counts, 0, total_repeat_length=5), expected)
    out = mjax.jit(lambda a, c: jnp.repeat(a, c, 0, total_repeat_length=5))(x, counts)
    check(out, expected)
    # Longer than the total: the tail repeats the last element, as in JAX.
    check(jnp.repeat(x, counts, 0, total_repeat_length=7),
          jjnp.repeat(x, counts, 0, total_repeat_length=7))
    with pytest.raises(TypeError, match="total number of repeats must be static"):
        mjax.jit(lambda a, c: jnp.repeat(a, c, 0))(x, counts)
    same_type_as_jax(jnp.repeat(lax.full((2,), 1.0), 2), jjnp.repeat(jax.lax.full((2,), 1.0), 2))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("seed", range(5))
def test_pad_modes(mode, seed):
    rng = np.random.default_rng(seed)
    ndim = seed % 3 + 1
    shape = rand_shape(rng, ndim, 1 if mode != "constant" else 0, 4)
    x = rand(rng, shape, DTYPES[seed % 3])
    widths = [tuple(int(v) for v in rng.integers(0, 7, 2)) for _ in range(ndim)]
    check(jnp.pad(x, widths, mode), np.pad(x, widths, mode))
    check(jnp.pad(x, 2, mode), np.pad(x, 2, mode))
    check(jnp.pad(x, (1, 2), mode), np.pad(x, (1, 2), mode))


def test_pad_constant_values_and_errors():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(jnp.pad(x, 1, constant_values=7), np.pad(x, 1, constant_values=7))
    check(jnp.pad(x, ((1, 0), (2, 1)), constant_values=((1, 2), (3, 4))),
          np.pad(x, ((1, 0), (2, 1)), constant_values=((1, 2), (3, 4))))
    same_type_as_jax(jnp.pad(x, 1, constant_values=2.5), jjnp.pad(x, 1, constant_values=2.5))
    same_type_as_jax(jnp.pad(lax.full((2,), 1.0), 1), jjnp.pad(jax.lax.full((2,), 1.0), 1))
    with pytest.raises(ValueError, match="unsupported shape"):
        jnp.pad(x, ((1, 2),) * 3)
    with pytest.raises(ValueError, match="negative"):
        jnp.pad(x, -1)
    with pytest.raises(NotImplementedError, match="Unimplemented padding mode 'foo'"):
        jnp.pad(x, 1, mode="foo")
    with pytest.raises(ValueError, match="empty axis"):
        jnp.pad(np.ones((0, 2)), 1, mode="edge")


# --- numpy: flip, rot90, roll ------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_flip_rot90_roll(seed):
    rng = np.random.default_rng(seed)
    ndim = seed % 3 + 2
    shape = rand_shape(rng, ndim)
    x = rand(rng, shape, DTYPES[seed % len(DTYPES)])
    axis = int(rng.integers(-ndim, ndim))
    check(jnp.flip(x), np.flip(x))
    check(jnp.flip(x, axis), np.flip(x, axis))
    check(jnp.flip(x, (0, -1)), np.flip(x, (0, -1)))
    check(jnp.fliplr(x), np.fliplr(x))
    check(jnp.flipud(x), np.flipud(x))
    for k in range(-1, 5):
        check(jnp.rot90(x, k), np.rot90(x, k))
        check(jnp.rot90(x, k, (-1, 0)), np.rot90(x, k, (-1, 0)))
    shift = int(rng.integers(-7, 8))
    check(jnp.roll(x, shift), np.roll(x, shift))
    check(jnp.roll(x, shift, axis), np.roll(x, shift, axis))
    check(jnp.roll(x, (shift, 1), (0, -1)), np.roll(x, (shift, 1), (0, -1)))
    with pytest.raises(ValueError, match="Axes must be different"):
        jnp.rot90(x, 1, (0, 0))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.flip(x, ndim)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.roll(x, 1, ndim)


# --- under jit -----------------------------------------------------------------

def test_shape_functions_trace_under_jit():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

    def f(a):
        b = jnp.concatenate([jnp.flip(a, 1), jnp.pad(a, ((0, 0), (1, 1), (0, 0)), "edge")], axis=1)
        c = jnp.stack(jnp.split(b, 2, axis=0), -1)
        return jnp.roll(jnp.tile(jnp.swapaxes(c, 0, -1), (1, 2, 1, 1)), 3, 2), jnp.repeat(a, 2, -1)

    ours, theirs = mjax.jit(f)(x), jax.jit(lambda a: _with(jjnp, f, a))(x)
    for o, t in zip(ours, theirs):
        check(o, t)


def _with(module, f, a):
    """Runs `f` with `jnp` bound to `module` (the same code under meshsim and JAX)."""
    g = type(f)(f.__code__, {**f.__globals__, "jnp": module}, f.__name__, f.__defaults__, f.__closure__)
    return g(a)


# --- lax.split / stack / unstack / tile / broadcast_shapes / broadcast_like / cumlogsumexp ---

@pytest.mark.parametrize("seed", range(3))
def test_lax_conveniences_match_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 5, 3))
    x = (rng.standard_normal(shape) * 10).astype(np.float32)
    axis = int(rng.integers(0, 3))
    cut = int(rng.integers(0, shape[axis] + 1))
    reps = tuple(int(r) for r in rng.integers(1, 4, 3))

    def run(jax):
        L = jax.lax
        return [*L.split(x, (cut, shape[axis] - cut), axis=axis),
                L.stack([x, x + 1], axis=axis), *L.unstack(x, axis), L.tile(x, reps),
                L.broadcast_like(x[0], np.zeros((2,) + shape)),
                L.cumlogsumexp(x, axis=axis), L.cumlogsumexp(x, axis=axis, reverse=True),
                jax.grad(lambda v: L.cumlogsumexp(v, axis=axis).sum())(x),
                L.optimization_barrier(x)]

    for got, want in zip(run(mjax), run(real_jax), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=2e-5)
    assert lax.broadcast_shapes((3, 1), (1, 4), (4,)) == real_jax.lax.broadcast_shapes((3, 1), (1, 4), (4,))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        lax.broadcast_shapes((3,), (4,))
    with pytest.raises(ValueError, match="Sum of sizes"):
        lax.split(x, (shape[axis] + 1,), axis=axis)
