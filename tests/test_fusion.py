"""Elementwise fusion: runs of float32 elementwise equations inside jit and
shard_map bodies execute as one tiled loop. The results must be the bits the
equations give one by one (while a profiler records equations, programs run
unfused: the reference here), and agree with NumPy and with real JAX."""
import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim.sharding import Mesh, PartitionSpec as P

RNG = np.random.default_rng(0)

UNARY = ["exp", "tanh", "negative", "sin", "log1p_abs", "sqrt_abs"]
BINARY = ["add", "subtract", "multiply", "div", "maximum", "minimum"]


def op(lib, name):
    """Operation `name` of a NumPy-like module (numpy, meshsim.numpy, jax.numpy)."""
    if name == "log1p_abs":
        return lambda x: lib.log1p(lib.abs(x))
    if name == "sqrt_abs":
        return lambda x: lib.sqrt(lib.abs(x))
    if name == "div":
        return lambda x, y: x / (lib.abs(y) + 1.0)
    return getattr(lib, name)


def random_chain(rng, length):
    """A chain of `length` elementwise steps over the three inputs and the
    results so far, some with a scalar operand."""
    steps = []
    for _ in range(length):
        if rng.random() < 0.35:
            steps.append((UNARY[rng.integers(len(UNARY))], int(rng.integers(3 + len(steps))), None, None))
        else:
            a, b = (int(rng.integers(3 + len(steps))) for _ in range(2))
            scalar = float(np.float32(rng.uniform(-2, 2))) if rng.random() < 0.3 else None
            steps.append((BINARY[rng.integers(len(BINARY))], a, b, scalar))
    return steps


def evaluate(lib, steps, inputs):
    """Every third value and the last: some outlive the run, others do not."""
    values = list(inputs)
    for name, a, b, scalar in steps:
        if b is None:
            values.append(op(lib, name)(values[a]))
        else:
            values.append(op(lib, name)(values[a], values[b] if scalar is None else np.float32(scalar)))
    return tuple(values[3::3]) + (values[-1],)


def magnitude(lib_values):
    finite = [np.abs(v[np.isfinite(v)]).max() for v in lib_values if v.size and np.isfinite(v).any()]
    return max([1.0, *finite])


def unfused(f, *args, tmp_path):
    jax.profiler.start_trace(str(tmp_path))
    try:
        return [np.asarray(v) for v in jax.tree.leaves(f(*args))]
    finally:
        jax.profiler.stop_trace()


def assert_same_bits(fused, plain, upto=None):
    """Bit for bit; with `upto`, only each flat result's first `upto` elements."""
    assert len(fused) == len(plain)
    for a, b in zip(fused, plain):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_array_equal(a.reshape(-1)[:upto].view(np.uint32), b.reshape(-1)[:upto].view(np.uint32))


def standalone_exp_tail(shape, steps):
    """Where a standalone exp on `shape` starts taking glibc's expf (the last 3,
    5, 6 or 7 elements of a rank-1 array under 16 elements, as XLA's CPU loop
    does), or None. An unfused exp equation computes those as a standalone exp
    does; inside a fused run XLA, and the fused loop, use the polynomial for
    every element, so only the elements before the tail are the same bits."""
    n = int(np.prod(shape))
    if len(shape) != 1 or n >= 16 or n % 8 not in (3, 5, 6, 7) or all(s[0] != "exp" for s in steps):
        return None
    return n - n % 8


def assert_close(got, want, scale):
    """Ulp-level differences of the transcendental functions, carried along
    the chain: relative to the largest value it computes."""
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("shape", [(), (1,), (15,), (17,), (3, 700), (2, 513), (4, 8, 33), (0, 5)])
@pytest.mark.parametrize("case", range(3))
def test_jit_chain_bit_identical_to_unfused(shape, case, tmp_path, real_jax):
    steps = random_chain(RNG, int(RNG.integers(3, 12)))
    inputs = [RNG.standard_normal(shape).astype(np.float32) * 3 for _ in range(3)]
    f = jax.jit(lambda *xs: evaluate(jnp, steps, xs))
    fused = [np.asarray(v) for v in f(*inputs)]
    assert_same_bits(fused, unfused(f, *inputs, tmp_path=tmp_path), upto=standalone_exp_tail(shape, steps))
    with np.errstate(all="ignore"):
        expected = evaluate(np, steps, inputs)
        scale = magnitude(evaluate(np, [*steps], inputs) + tuple(inputs))
    assert_close(fused, expected, scale)
    assert_close(fused, real_jax.jit(lambda *xs: evaluate(real_jax.numpy, steps, xs))(*inputs), scale)


def views_and_divisors(lib, x, y, w):
    a = x * y + w.T  # a transposed operand
    b = a / y.sum(axis=0, keepdims=True)  # a divisor broadcast along rows
    c = lib.exp(b * 0.25) - a / 3.0
    return c * x + lib.tanh(c), b


def test_views_and_broadcast_divisors_inside_a_run(tmp_path, real_jax):
    """Operands that are views are packed once; a division by a broadcast
    divides by its reciprocal, as unfused."""
    x, y = (RNG.standard_normal((37, 41)).astype(np.float32) for _ in range(2))
    w = RNG.standard_normal((41, 37)).astype(np.float32)
    f = jax.jit(lambda *xs: views_and_divisors(jnp, *xs))
    fused = [np.asarray(v) for v in f(x, y, w)]
    assert_same_bits(fused, unfused(f, x, y, w, tmp_path=tmp_path))
    theirs = [np.asarray(v) for v in real_jax.jit(lambda *xs: views_and_divisors(real_jax.numpy, *xs))(x, y, w)]
    assert_close(fused, theirs, magnitude(fused))  # XLA sums the divisor in its own order


def size_one_operands(lib, x, row, column):
    a = x * 0.5 + row  # the ops broadcast the size-1 dims themselves (`add f32[37,41] f32[1,41]`)
    b = lib.tanh(a - column) * row
    return lib.maximum(b, column) * x + 1.0, a / (lib.abs(row) + 1.0)


def test_size_one_operands_inside_a_run(tmp_path, real_jax):
    """Operands whose size-1 dims the ops broadcast join runs, read as their copies:
    the bits of the unfused ops."""
    x = RNG.standard_normal((37, 41)).astype(np.float32)
    row, column = RNG.standard_normal((1, 41)).astype(np.float32), RNG.standard_normal((37, 1)).astype(np.float32)
    f = jax.jit(lambda *xs: size_one_operands(jnp, *xs))
    fused = [np.asarray(v) for v in f(x, row, column)]
    assert_same_bits(fused, unfused(f, x, row, column, tmp_path=tmp_path))
    theirs = real_jax.jit(lambda *xs: size_one_operands(real_jax.numpy, *xs))(x, row, column)
    assert_close(fused, theirs, magnitude(fused))


@pytest.mark.parametrize("case", range(3))
def test_shard_map_body_chain_bit_identical_to_unfused(case, tmp_path):
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
    steps = random_chain(RNG, int(RNG.integers(3, 10)))
    inputs = [RNG.standard_normal((8, 1100)).astype(np.float32) for _ in range(3)]
    with np.errstate(all="ignore"):
        blocks = [evaluate(np, steps, [np.split(a, 4, axis=1)[j] for a in inputs]) for j in range(4)]
    n_out = len(blocks[0])

    def body(x, y, z):
        return tuple(jax.lax.psum(v, "b") for v in evaluate(jnp, steps, (x, y, z)))

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("a", "b"),) * 3, out_specs=(P("a"),) * n_out))
    fused = [np.asarray(v) for v in f(*inputs)]
    assert_same_bits(fused, unfused(f, *inputs, tmp_path=tmp_path))
    want = [np.sum([blk[k] for blk in blocks], axis=0) for k in range(n_out)]
    assert_close(fused, want, 4 * magnitude([v for blk in blocks for v in blk]))


def interleaved(lib, x, y, w):
    """Elementwise steps with reductions, products and reshapes between them:
    runs gather equations past the ones that do not read their values."""
    a = x * y - 1.5
    s = a.sum(axis=1, keepdims=True)  # reads the run: ends it
    b = lib.tanh(x) + y * y
    m = x @ w  # reads neither run
    c = b * 2.0 - lib.exp(-b)
    r = (m.reshape(-1) * 0.5).reshape(m.shape)
    d = c / (a * a + 1.0) + s
    return d, r, lib.maximum(d, 0.0) * b


@pytest.mark.parametrize("shape", [(6, 6), (24, 24), (40, 40)])
def test_runs_gather_equations_past_unrelated_ones(shape, tmp_path, real_jax):
    x, y, w = (RNG.standard_normal(shape).astype(np.float32) for _ in range(3))
    f = jax.jit(lambda *xs: interleaved(jnp, *xs))
    fused = [np.asarray(v) for v in f(x, y, w)]
    assert_same_bits(fused, unfused(f, x, y, w, tmp_path=tmp_path))
    want = interleaved(np, x, y, w)
    assert_close(fused, want, magnitude(list(want)))
    assert_close(fused, real_jax.jit(lambda *xs: interleaved(real_jax.numpy, *xs))(x, y, w), magnitude(list(want)))


def subnormal_heavy(shape, rng):
    """Normal values, some scaled into float32's subnormal range, and edge values."""
    x = rng.standard_normal(shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    picks = rng.integers(0, flat.size, 200)
    f32 = np.finfo(np.float32)
    flat[picks] = rng.choice(np.array([f32.tiny / 4, -f32.tiny / 64, 1e-39, 0.0, -0.0, np.inf, -np.inf, np.nan,
                                       f32.max, 88.5, -100.0], np.float32), picks.size)
    return x


SINGLE_OPS = {
    "exp": lambda lib, x, y: lib.exp(x),
    "tanh": lambda lib, x, y: lib.tanh(x),
    "negative": lambda lib, x, y: -x,
    "add": lambda lib, x, y: x + y,
    "multiply_tiny": lambda lib, x, y: x * np.float32(1e-30),  # results below float32's normal range
    "maximum": lambda lib, x, y: lib.maximum(x, y),
    "add_transposed": lambda lib, x, y: x.T + y.T,
}


@pytest.mark.parametrize("name", sorted(SINGLE_OPS))
def test_large_single_ops_split_over_threads_as_unfused(name, tmp_path, real_jax):
    """An equation of 16K elements or more runs alone through the tiled loop,
    split into tasks on TBB's threads: each task computes with the caller's
    denormal flags (subnormal operands and results flushed, as XLA does), so
    the bits are those of the kernel run unsplit, and JAX's for exact ops."""
    rng = np.random.default_rng(len(name))
    shape = (int(rng.integers(128, 400)), int(rng.integers(128, 300)))
    x, y = subnormal_heavy(shape, rng), subnormal_heavy(shape, rng)
    fn = SINGLE_OPS[name]
    f = jax.jit(lambda a, b: fn(jnp, a, b))
    split = [np.asarray(f(x, y))]
    assert_same_bits(split, unfused(f, x, y, tmp_path=tmp_path))
    theirs = np.asarray(real_jax.jit(lambda a, b: fn(real_jax.numpy, a, b))(x, y))
    if name in ("negative", "add", "multiply_tiny", "maximum", "add_transposed"):
        np.testing.assert_array_equal(split[0].view(np.uint32), theirs.view(np.uint32))
    else:
        np.testing.assert_allclose(split[0], theirs, rtol=1e-6, atol=0)


@pytest.mark.parametrize("case", range(3))
def test_long_runs_over_threads_bit_identical_to_unfused(case, tmp_path, real_jax):
    """Long chains on arrays split over threads: temporaries share scratch
    tiles once their last reader is done, which must not change a bit."""
    rng = np.random.default_rng(100 + case)
    steps = random_chain(rng, int(rng.integers(12, 30)))
    shape = (int(rng.integers(64, 200)), int(rng.integers(200, 500)))
    inputs = [subnormal_heavy(shape, rng) for _ in range(3)]
    f = jax.jit(lambda *xs: evaluate(jnp, steps, xs))
    fused = [np.asarray(v) for v in f(*inputs)]
    assert_same_bits(fused, unfused(f, *inputs, tmp_path=tmp_path))
    theirs = real_jax.jit(lambda *xs: evaluate(real_jax.numpy, steps, xs))(*inputs)
    for got, want in zip(fused, theirs):
        want = np.asarray(want)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
