"""float32/float64/complex sums in XLA on CPU's order, bit for bit against real JAX.

XLA's own loops fold each output's reduced elements one by one from zero in
row-major order, a reduced dimension over 32 first cut into windows of 32 (the
padding split before and after). float32/float64 sums of 4096 elements or more
go to YNNPACK instead (blocked accumulators; not reproduced: those are checked
to a few ulps), and so do XLA's vectorised multi-axis loops; complex sums never
go there. Values span nine decades so that any other order shows in the bits."""
import contextlib
import zlib

import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim.sharding import PartitionSpec as MP

jax = pytest.importorskip("jax")
jnp = jax.numpy

SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 40, 64, 65, 100, 129, 300]
YNNPACK_ELEMENTS = 4096


@contextlib.contextmanager
def x64_for(dtype):
    wide = np.dtype(dtype) in (np.float64, np.complex128)
    with jax.enable_x64(wide), ms.enable_x64(wide):
        yield


def rng_for(*parts):
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def spread(rng, shape, dtype):
    """Normal values scaled by 10**k, k in [-3, 6): sums that cancel and round."""
    def part():
        return rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 6, shape)
    x = part() + 1j * part() if np.dtype(dtype).kind == "c" else part()
    return np.asarray(x).astype(dtype)


def single_axis_case(rng, limit):
    """A random shape (rank 1-4, fewer than `limit` elements) and one reduced
    axis longer than 1, with any size-1 axes also reduced."""
    while True:
        shape = tuple(int(rng.choice(SIZES)) for _ in range(int(rng.integers(1, 5))))
        long_axes = [d for d, n in enumerate(shape) if n > 1]
        if long_axes and np.prod(shape) < limit:
            break
    axis = int(rng.choice(long_axes))
    ones = [d for d, n in enumerate(shape) if n == 1 and rng.random() < 0.5]
    return shape, tuple(sorted([axis] + ones))


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8)), (
        f"max difference {np.max(np.abs(got - want))}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", range(40))
def test_sum_over_one_axis_is_xlas_order(dtype, case):
    rng = rng_for("one-axis", dtype, case)
    shape, axes = single_axis_case(rng, YNNPACK_ELEMENTS)
    x = spread(rng, shape, dtype)
    with x64_for(dtype):
        same_bits(mnp.sum(mnp.asarray(x), axis=axes), jnp.sum(jnp.asarray(x), axis=axes))
        same_bits(mnp.mean(mnp.asarray(x), axis=axes), jnp.mean(jnp.asarray(x), axis=axes))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("case", range(20))
def test_complex_sum_is_xlas_order_at_any_size(dtype, case):
    rng = rng_for("complex", dtype, case)
    shape, axes = single_axis_case(rng, 40000)
    x = spread(rng, shape, dtype)
    with x64_for(dtype):
        same_bits(mnp.sum(mnp.asarray(x), axis=axes), jnp.sum(jnp.asarray(x), axis=axes))


@pytest.mark.parametrize("case", range(12))
def test_sums_inside_jit_vmap_and_grad_are_xlas_order(case):
    rng = rng_for("transforms", case)
    rows, cols = int(rng.choice([3, 17, 40, 65])), int(rng.choice([5, 33, 50]))
    x = spread(rng, (rows, cols), np.float32)
    b = spread(rng, (cols,), np.float32)

    def program(j, np_):
        loss = lambda b: np_.sum((x * 0.5 + b) ** 2)  # noqa: E731
        return (j.jit(lambda v: np_.sum(v * 2.0, axis=1))(x),
                j.vmap(lambda r: np_.sum(r))(x),
                j.vmap(lambda c: np_.sum(c), in_axes=1)(x),
                j.grad(loss)(b))  # the cotangent of a broadcast: a sum over rows

    for got, want in zip(program(ms, mnp), program(jax, jnp)):
        same_bits(got, want)


@pytest.mark.parametrize("case", range(6))
def test_sums_of_blocks_under_shard_map_are_xlas_order(case):
    rng = rng_for("shard_map", case)
    rows, cols = 8 * int(rng.choice([5, 9, 40])), int(rng.choice([3, 33, 64]))
    x = spread(rng, (rows, cols), np.float32)

    def program(j, np_, P):
        mesh = j.make_mesh((8,), ("dp",), axis_types=(j.sharding.AxisType.Auto,))
        body = lambda blk: (np_.sum(blk, axis=0, keepdims=True),  # noqa: E731
                            np_.sum(blk, axis=1))
        return j.shard_map(body, mesh=mesh, in_specs=P("dp"), out_specs=(P("dp"), P("dp")))(x)

    got, want = program(ms, mnp, MP), program(jax, jnp, jax.sharding.PartitionSpec)
    for g, w in zip(got, want):
        same_bits(g, w)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", range(10))
def test_other_sums_stay_within_a_few_ulps(dtype, case):
    """Multi-axis sums (XLA's loops vectorised over the outer reduced axis) and
    sums of 4096 elements or more (YNNPACK) are not in XLA's order yet."""
    rng = rng_for("other", dtype, case)
    shape = tuple(int(rng.choice([2, 4, 8, 16, 64, 100])) for _ in range(3))
    axes = tuple(sorted(rng.choice(3, int(rng.integers(1, 4)), replace=False).tolist()))
    x = np.abs(spread(rng, shape, dtype))  # no cancellation: a relative bound holds
    with x64_for(dtype):
        got = np.asarray(mnp.sum(mnp.asarray(x), axis=axes))
        want = np.asarray(jnp.sum(jnp.asarray(x), axis=axes))
    np.testing.assert_allclose(got, want, rtol=16 * np.finfo(dtype).eps)
