"""Collectives in bfloat16, float16, float32 and float8 against real JAX, bit for
bit (NaN signs and payloads included): psum, pmax, pmin and psum_scatter inside
shard_map, eagerly and under jit, and the all-reduces that combine the partial
sums, maxima, minima and dots of sharded dimensions under jit on Auto meshes.

Each case draws its shapes, its mesh (2, 4 or 8 devices, one to three axes),
the axes it reduces over and its values from its own seed. The values mix
random numbers of several scales with the format's edges (+-0, +-inf, NaN of
either sign, subnormals, the largest finite value and values whose sum leaves
the range, which float8_e4m3fn turns into NaN), and some elements hold the
same edge on every device (all -0, all NaN, all subnormal), where XLA's CPU
all-reduce differs most from a plain elementwise sum: it starts from +0,
flushes subnormals and ends an all-NaN max at -inf."""
import math
import zlib

import ml_dtypes
import numpy as np
import pytest

import meshsim

jax = pytest.importorskip("jax")

DTYPES = ["bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2"]
MESHES = [((2,), ("x",)), ((4,), ("x",)), ((8,), ("x",)), ((2, 4), ("x", "y")), ((4, 2), ("x", "y")),
          ((2, 2), ("x", "y")), ((2, 2, 2), ("x", "y", "z"))]
SHARD_MAP_OPS = ["psum", "pmax", "pmin", "psum_scatter", "psum_scatter_untiled"]
AUTO_OPS = ["sum", "max", "min", "dot"]


def dtype_of(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def edges(name):
    """The format's edge values, as float32 (NaNs of both signs)."""
    info = ml_dtypes.finfo(dtype_of(name))
    top, sub = float(info.max), float(info.smallest_subnormal)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, top, -top, top * 0.75, -top * 0.75, sub, -sub,
            sub * 3, float(info.tiny), -float(info.tiny), float(info.tiny) / 2, 1.0, 1 + float(info.eps)]
    return np.array(vals, np.float32)


def draw(rng, name, shape):
    """Random values of `name` with edge values mixed in."""
    scale = rng.choice([1e-3, 1.0, 30.0, float(ml_dtypes.finfo(dtype_of(name)).max) / 8])
    vals = (rng.standard_normal(shape) * scale).astype(np.float32)
    mask = rng.random(shape) < 0.3
    vals[mask] = rng.choice(edges(name), int(mask.sum()))
    with np.errstate(over="ignore", invalid="ignore"):
        return vals.astype(dtype_of(name))


def same_on_every_device(rng, name, x, ndev):
    """Sets a few elements to one edge on every device's block (x is split
    along dim 0 into `ndev` blocks)."""
    blocks = x.reshape((ndev, x.shape[0] // ndev) + x.shape[1:])
    info = ml_dtypes.finfo(dtype_of(name))
    for _ in range(rng.integers(1, 4)):
        at = tuple(rng.integers(0, s) for s in blocks.shape[1:])
        v = rng.choice([-0.0, np.nan, -np.nan, float(info.smallest_subnormal), -float(info.smallest_subnormal),
                        float(info.max)])
        blocks[(slice(None),) + at] = np.float32(v).astype(x.dtype)
    return blocks.reshape(x.shape)


def case_ids(ops, per_op):
    return [(name, op, seed) for name in DTYPES for op in ops for seed in range(per_op)]


def pick_mesh(rng):
    shape, names = MESHES[rng.integers(len(MESHES))]
    axes = [a for a in names if rng.random() < 0.7] or [names[-1]]
    return shape, names, tuple(axes)


def make_mesh(lib, shape, names):
    auto = (lib.sharding.AxisType.Auto,) * len(shape)
    return lib.make_mesh(shape, names, devices=lib.devices()[:math.prod(shape)], axis_types=auto)


def shard_map_program(lib, op, axes, dim):
    lax = lib.lax

    def body(a):
        if op == "psum_scatter":
            return lax.psum_scatter(a, axes, scatter_dimension=dim, tiled=True)
        if op == "psum_scatter_untiled":
            return lax.psum_scatter(a, axes, scatter_dimension=dim)
        return getattr(lax, op)(a, axes)

    return body


def run_shard_map(lib, name, op, seed):
    rng = np.random.default_rng(zlib.crc32(f"{name}/{op}/{seed}".encode()))
    shape, names, axes = pick_mesh(rng)
    ndev, n = math.prod(shape), math.prod(shape[names.index(a)] for a in axes)
    block = [int(v) for v in rng.integers(1, 5, rng.integers(1, 4))]
    dim = 0
    if op.startswith("psum_scatter"):
        if op == "psum_scatter_untiled":  # a new dimension of size n, scattered and dropped
            dim = int(rng.integers(0, len(block) + 1))
            block.insert(dim, n)
        else:
            dim = int(rng.integers(0, len(block)))
            block[dim] *= n
    x = draw(rng, name, (ndev * block[0],) + tuple(block[1:]))
    x = same_on_every_device(rng, name, x, ndev)
    mesh = make_mesh(lib, shape, names)
    P = lib.sharding.PartitionSpec
    in_spec = P(names)
    if op in ("psum", "pmax", "pmin"):
        rest = tuple(a for a in names if a not in axes)
        out_spec = P(rest) if rest else P()
    else:
        out_spec = in_spec
    f = lib.shard_map(shard_map_program(lib, op, axes, dim), mesh=mesh, in_specs=in_spec, out_specs=out_spec)
    if seed % 2:
        f = lib.jit(f)
    arg = lib.device_put(x, lib.sharding.NamedSharding(mesh, in_spec))
    return np.asarray(f(arg))


def run_auto(lib, name, op, seed):
    rng = np.random.default_rng(zlib.crc32(f"auto/{name}/{op}/{seed}".encode()))
    shape, names, axes = pick_mesh(rng)
    n = math.prod(shape[names.index(a)] for a in axes)
    mesh = make_mesh(lib, shape, names)
    P, Named = lib.sharding.PartitionSpec, lib.sharding.NamedSharding
    jnp = lib.numpy
    if op == "dot":
        m, k, c = int(rng.integers(1, 5)), n * int(rng.integers(1, 4)), int(rng.integers(1, 5))
        a, b = draw(rng, name, (m, k)), draw(rng, name, (k, c))
        a = lib.device_put(a, Named(mesh, P(None, axes)))
        b = lib.device_put(b, Named(mesh, P(axes, None)))
        return np.asarray(lib.jit(jnp.matmul)(a, b))
    rows = n * int(rng.integers(1, 4))
    x = draw(rng, name, (rows, int(rng.integers(1, 6))))
    x = same_on_every_device(rng, name, x, n)
    x = lib.device_put(x, Named(mesh, P(axes)))
    reduce = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min}[op]
    return np.asarray(lib.jit(lambda v: reduce(v, axis=0))(x))


def assert_bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    diff = np.nonzero(bits(got) != bits(want))
    shown = [(tuple(int(i) for i in at), got[at], want[at], hex(bits(got)[at]), hex(bits(want)[at]))
             for at in list(zip(*diff))[:4]]
    assert not diff[0].size, f"{diff[0].size} elements differ (index, meshsim, JAX): {shown}"


@pytest.mark.parametrize("name,op,seed", case_ids(SHARD_MAP_OPS, 6))
def test_shard_map_collectives_bit_for_bit(name, op, seed):
    assert_bits_equal(run_shard_map(meshsim, name, op, seed), run_shard_map(jax, name, op, seed))


@pytest.mark.parametrize("name,op,seed", case_ids(AUTO_OPS, 4))
def test_auto_mesh_partials_bit_for_bit(name, op, seed):
    assert_bits_equal(run_auto(meshsim, name, op, seed), run_auto(jax, name, op, seed))


@pytest.mark.parametrize("name", DTYPES)
def test_edges_on_every_device(name):
    """Each edge value on all 8 devices, and each pair of edges on alternate
    devices, through psum, pmax and pmin."""
    e = edges(name)
    with np.errstate(over="ignore", invalid="ignore"):
        same = e.astype(dtype_of(name))
        pairs = np.stack([np.repeat(e, len(e)), np.tile(e, len(e))], 1).astype(dtype_of(name))
    x = np.concatenate([np.broadcast_to(same, (8, len(e))), np.tile(pairs.T, (4, 1))], axis=1)

    def run(lib):
        mesh = make_mesh(lib, (8,), ("x",))
        P = lib.sharding.PartitionSpec
        arg = lib.device_put(np.ascontiguousarray(x), lib.sharding.NamedSharding(mesh, P("x")))
        out = []
        for op in ("psum", "pmax", "pmin"):
            f = lib.jit(lib.shard_map(lambda a, op=op: getattr(lib.lax, op)(a, "x"), mesh=mesh,
                                      in_specs=P("x"), out_specs=P()))
            out.append(np.asarray(f(arg)))
        return np.stack(out)

    assert_bits_equal(run(meshsim), run(jax))
