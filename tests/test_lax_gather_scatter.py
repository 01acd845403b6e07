"""lax.gather / lax.scatter* with XLA's dimension numbers against real JAX: random operand
shapes, collapsed/offset/batching dims, slice and window sizes, in- and out-of-range
starts under every mode, index and operand dtypes; gradients, vmap and jit; scatter_apply,
index_take; and JAX's errors."""
import zlib

import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp
from meshsim import lax as mlax

jax = pytest.importorskip("jax")
jnp = jax.numpy
jlax = jax.lax


def seeded(name: str, i: int):
    return np.random.default_rng(zlib.crc32(f"{name}-{i}".encode()))


def same(got, expected, rtol=1e-6):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, got.dtype,
                                                                        expected.shape, expected.dtype)
    np.testing.assert_allclose(got.astype(np.float64) if got.dtype.kind != "b" else got,
                               expected.astype(np.float64) if got.dtype.kind != "b" else expected,
                               rtol=rtol, atol=rtol)


def random_indices(rng, operand_shape, batch_shape, index_dims, spread: int):
    """Index vectors of shape batch + (len(index_dims),); starts range `spread` past each end."""
    cols = [rng.integers(-spread, operand_shape[d] + spread, size=batch_shape) for d in index_dims]
    return np.stack(cols, axis=-1).astype(np.int32) if cols else np.zeros(batch_shape + (0,), np.int32)


def random_gather(rng):
    """A valid random (operand, indices, dimension numbers, slice sizes)."""
    rank = int(rng.integers(1, 5))
    shape = tuple(int(n) for n in rng.integers(1, 5, size=rank))
    dims = list(range(rank))
    rng.shuffle(dims)
    n_batching = int(rng.integers(0, 2)) if rank > 1 else 0
    operand_batching = tuple(sorted(dims[:n_batching]))
    rest = dims[n_batching:]
    start_map = tuple(int(d) for d in rng.permutation(rest)[:int(rng.integers(0, len(rest) + 1))])
    collapsed = tuple(sorted(d for d in rest if d in start_map and rng.random() < 0.5))
    slice_sizes = tuple(1 if (d in collapsed or d in operand_batching) else int(rng.integers(0, shape[d] + 1))
                        for d in range(rank))
    batch_rank = int(rng.integers(n_batching, n_batching + 3))
    batch_shape = [int(n) for n in rng.integers(1, 4, size=batch_rank)]
    idx_batching = tuple(int(i) for i in rng.permutation(batch_rank)[:n_batching])
    for d, i in zip(operand_batching, idx_batching):
        batch_shape[i] = shape[d]
    batch_shape = tuple(batch_shape)
    indices = random_indices(rng, shape, batch_shape, start_map, spread=2)
    n_offset = rank - len(collapsed) - n_batching
    out_rank = batch_rank + n_offset
    offset_dims = tuple(sorted(int(o) for o in rng.permutation(out_rank)[:n_offset]))
    dn = dict(offset_dims=offset_dims, collapsed_slice_dims=collapsed, start_index_map=start_map,
              operand_batching_dims=operand_batching, start_indices_batching_dims=idx_batching)
    return shape, indices, dn, slice_sizes


DTYPES = [np.float32, np.int32, np.uint8, np.bool_, jnp.bfloat16]


def operand_of(rng, shape, dtype):
    x = rng.standard_normal(shape) * 4
    return (x > 0 if dtype == np.bool_ else x).astype(dtype)


@pytest.mark.parametrize("mode", [None, "clip", "fill", "promise_in_bounds"])
@pytest.mark.parametrize("case", range(30))
def test_gather_random_dimension_numbers(mode, case):
    rng = seeded(f"gather-{mode}", case)
    shape, indices, dn, slice_sizes = random_gather(rng)
    dtype = DTYPES[case % len(DTYPES)]
    x = operand_of(rng, shape, dtype)
    idx_dtype = [np.int32, np.int8, np.uint32, np.int16][case % 4]
    if np.dtype(idx_dtype).kind == "u":
        indices = np.abs(indices)
    indices = indices.astype(idx_dtype)
    fill = -7 if (mode == "fill" and case % 3 == 0 and dtype != np.bool_) else None
    expected = jlax.gather(x, indices, jlax.GatherDimensionNumbers(**dn), slice_sizes, mode=mode, fill_value=fill)
    got = mlax.gather(x, indices, mlax.GatherDimensionNumbers(**dn), slice_sizes, mode=mode, fill_value=fill)
    same(got, expected)


def random_scatter(rng, kind):
    """A valid random (operand shape, indices, dimension numbers, updates shape). Index vectors are
    not empty: XLA's CPU scatter with empty ones keeps one update of several at the same place."""
    shape, indices, g, slice_sizes = random_gather(rng)
    while not g["start_index_map"]:
        shape, indices, g, slice_sizes = random_gather(rng)
    if kind == "scatter":  # windows must not overlap: XLA leaves overlapping replacements' order open
        batching = g["start_indices_batching_dims"]
        indices = indices[tuple(slice(None) if i in batching else slice(0, 1) for i in range(indices.ndim - 1))]
    batch_shape = tuple(indices.shape[:-1])
    n_window = len(g["offset_dims"])
    up_rank = len(batch_shape) + n_window
    window_dims = tuple(sorted(int(o) for o in rng.permutation(up_rank)[:n_window]))
    kept = [d for d in range(len(shape)) if d not in g["collapsed_slice_dims"] and d not in g["operand_batching_dims"]]
    up_shape, b, w = [], iter(batch_shape), iter(kept)
    for u in range(up_rank):
        up_shape.append(slice_sizes[next(w)] if u in window_dims else next(b))
    dn = dict(update_window_dims=window_dims, inserted_window_dims=g["collapsed_slice_dims"],
              scatter_dims_to_operand_dims=g["start_index_map"], operand_batching_dims=g["operand_batching_dims"],
              scatter_indices_batching_dims=g["start_indices_batching_dims"])
    return shape, indices, dn, tuple(up_shape)


KINDS = ["scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max"]


@pytest.mark.parametrize("mode", [None, "clip", "drop", "promise_in_bounds"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", range(12))
def test_scatter_random_dimension_numbers(kind, mode, case):
    rng = seeded(f"{kind}-{mode}", case)
    shape, indices, dn, up_shape = random_scatter(rng, kind)
    dtype = [np.float32, np.int32][case % 2]
    x = operand_of(rng, shape, dtype)
    u = (rng.standard_normal(up_shape) * 2 + (1.5 if kind == "scatter_mul" else 0)).astype(dtype)
    expected = getattr(jlax, kind)(x, indices, u, jlax.ScatterDimensionNumbers(**dn), mode=mode)
    got = getattr(mlax, kind)(x, indices, u, mlax.ScatterDimensionNumbers(**dn), mode=mode)
    same(got, expected, rtol=1e-5)


@pytest.mark.parametrize("case", range(10))
def test_gather_gradients_vmap_and_jit(case):
    rng = seeded("gather-grad", case)
    shape, indices, dn, slice_sizes = random_gather(rng)
    x = rng.standard_normal(shape).astype(np.float32)
    mode = ["clip", "fill"][case % 2]

    def loss(lax_mod, xv):
        out = lax_mod.gather(xv, indices, lax_mod.GatherDimensionNumbers(**dn), slice_sizes, mode=mode,
                             fill_value=0.0)
        w = np.arange(1, 1 + int(np.prod(out.shape)), dtype=np.float32).reshape(out.shape)
        return (out * w).sum()

    same(meshsim.grad(lambda v: loss(mlax, v))(x), jax.grad(lambda v: loss(jlax, v))(x), rtol=1e-5)
    same(meshsim.jit(lambda v: loss(mlax, v))(x), jax.jit(lambda v: loss(jlax, v))(x), rtol=1e-5)
    xs = np.stack([x, 2 * x, -x])
    same(meshsim.vmap(lambda v: loss(mlax, v))(xs), jax.vmap(lambda v: loss(jlax, v))(xs), rtol=1e-5)


@pytest.mark.parametrize("kind", ["scatter", "scatter_add", "scatter_mul", "scatter_max"])
@pytest.mark.parametrize("case", range(6))
def test_scatter_gradients(kind, case):
    rng = seeded(f"scatter-grad-{kind}", case)
    shape, indices, dn, up_shape = random_scatter(rng, "scatter")
    x = rng.standard_normal(shape).astype(np.float32)
    u = (rng.standard_normal(up_shape) + 0.5).astype(np.float32)
    # JAX's scatter_max derivative treats clamped windows as dropped (its value does not): drop only.
    mode = None if kind == "scatter_max" else ["clip", None][case % 2]
    argnums = (0,) if kind == "scatter_mul" else (0, 1)

    def loss(lax_mod, xv, uv):
        out = getattr(lax_mod, kind)(xv, indices, uv, lax_mod.ScatterDimensionNumbers(**dn), mode=mode)
        w = np.arange(1, 1 + out.size, dtype=np.float32).reshape(out.shape)
        return (out * w).sum()

    got = meshsim.grad(lambda a, b: loss(mlax, a, b), argnums=argnums)(x, u)
    expected = jax.grad(lambda a, b: loss(jlax, a, b), argnums=argnums)(x, u)
    for g, e in zip(got, expected):
        same(g, e, rtol=1e-5)


def test_scatter_vmap_over_updates():
    rng = seeded("scatter-vmap", 0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    us = rng.standard_normal((3, 2, 4)).astype(np.float32)
    idx = np.array([[1], [3]], np.int32)
    dn = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    got = meshsim.vmap(lambda u: mlax.scatter_add(x, idx, u, mlax.ScatterDimensionNumbers(**dn)))(us)
    expected = jax.vmap(lambda u: jlax.scatter_add(x, idx, u, jlax.ScatterDimensionNumbers(**dn)))(us)
    same(got, expected)


def test_scatter_apply_applies_once_per_cover():
    dn = dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    x = np.arange(1, 7, dtype=np.float32)
    idx = np.array([[1], [1], [4], [9]], np.int32)
    for mode in (None, "clip"):
        got = mlax.scatter_apply(x, idx, lambda v: v * 3 + 1, mlax.ScatterDimensionNumbers(**dn),
                                 update_shape=(4,), mode=mode)
        expected = jlax.scatter_apply(x, idx, lambda v: v * 3 + 1, jlax.ScatterDimensionNumbers(**dn),
                                      update_shape=(4,), mode=mode)
        same(got, expected)


@pytest.mark.parametrize("case", range(6))
def test_index_take(case):
    rng = seeded("index_take", case)
    shape = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 4))))
    axes = tuple(sorted(int(a) for a in rng.permutation(len(shape))[:int(rng.integers(1, len(shape) + 1))]))
    n = int(rng.integers(1, 5))
    idxs = tuple(rng.integers(-6, 9, size=n).astype(np.int32) for _ in axes)
    x = rng.standard_normal(shape).astype(np.float32)
    same(mlax.index_take(x, idxs, axes), jlax.index_take(x, idxs, axes))


def test_mode_enum_and_dimension_numbers_types():
    assert mlax.GatherScatterMode.from_any("fill") is mlax.GatherScatterMode.FILL_OR_DROP
    assert mlax.GatherScatterMode.from_any(None) is mlax.GatherScatterMode.FILL_OR_DROP
    assert [m.name for m in mlax.GatherScatterMode] == [m.name for m in jlax.GatherScatterMode]
    assert mlax.GatherDimensionNumbers._fields == jlax.GatherDimensionNumbers._fields
    assert mlax.ScatterDimensionNumbers._fields == jlax.ScatterDimensionNumbers._fields


def _raises_like(fn_m, fn_j):
    with pytest.raises(Exception) as expected:
        fn_j()
    with pytest.raises(type(expected.value)) as got:
        fn_m()
    assert str(got.value) == str(expected.value)


GDN = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))


@pytest.mark.parametrize("args", [
    ("gather", np.array([[1]]), GDN, (1, 7), {}),
    ("gather", np.array([[1]]), GDN, (2, 6), {}),
    ("gather", np.array([[1.0]]), GDN, (1, 6), {}),
    ("gather", np.array([[1]]), dict(GDN, start_index_map=(0, 1)), (1, 6), {}),
    ("gather", np.array([[1]]), GDN, (1, 6, 1), {}),
    ("gather", np.array([[1]]), dict(GDN, offset_dims=(0, 1)), (1, 6), {}),
    ("gather", np.array([[1]]), GDN, (1, 6), {"mode": "bogus"}),
    ("gather", np.array([[1, 0]]), dict(offset_dims=(), collapsed_slice_dims=(1, 0), start_index_map=(0, 1)),
     (1, 1), {}),
], ids=["slice-too-big", "collapse-non-1", "float-indices", "index-vector", "slice-rank", "offset-count", "mode",
        "unsorted"])
def test_gather_errors(args):
    _, idx, dn, sizes, kw = args
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    _raises_like(lambda: mlax.gather(x, idx, mlax.GatherDimensionNumbers(**dn), sizes, **kw),
                 lambda: jlax.gather(x, idx, jlax.GatherDimensionNumbers(**dn), sizes, **kw))


SDN = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


@pytest.mark.parametrize("updates,dn", [
    (np.ones((1, 6), np.int32), SDN),
    (np.ones((1, 7), np.float32), SDN),
    (np.ones((2, 6), np.float32), SDN),
    (np.ones((1, 6), np.float32), dict(SDN, update_window_dims=(0, 1))),
], ids=["dtype", "window-bound", "scatter-bound", "rank"])
def test_scatter_errors(updates, dn):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    idx = np.array([[1]])
    _raises_like(lambda: mlax.scatter_add(x, idx, updates, mlax.ScatterDimensionNumbers(**dn)),
                 lambda: jlax.scatter_add(x, idx, updates, jlax.ScatterDimensionNumbers(**dn)))


def test_jnp_values_flow_through():
    x = mnp.arange(12.0).reshape(3, 4)
    out = mlax.gather(x, mnp.array([[2], [0]]), mlax.GatherDimensionNumbers((1,), (0,), (0,)), (1, 4))
    np.testing.assert_array_equal(np.asarray(out), np.arange(12.0).reshape(3, 4)[[2, 0]])
