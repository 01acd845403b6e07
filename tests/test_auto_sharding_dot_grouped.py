"""Contractions whose result is split over a mesh axis that also splits the other
operand (the contracted dim or a free dim of it), on meshes with axes that split
nothing: XLA's partitioner groups the devices by the shared axis and moves that
operand's blocks, cut into pieces over the idle axes, with one collective-permute;
it then gathers the pieces within the group, or, when that moves no less, computes
on them and all-reduces the partial results over the idle axes. The result keeps
the split of the operand it comes from. In a batched contraction whose batch dim takes the
shared axis, the operand is re-tiled to the batch blocks: its dim keeps its block count, over
the major idle (sub-)axes, and is gathered within the group, never computed on in pieces.
A batched result keeps the free dim's split of the smaller operand though the larger splits
its contracted dim over the same axis (Shardy lays a tensor out by its own dims' factors).
Random shapes, meshes and layouts against the collectives of XLA's compiled program."""
import numpy as np
import pytest

import jax
from auto_oracle import assert_like_jax, normalized, placed_on_auto_mesh, run_jax

MESHES = [((2, 4), ("X", "Y")), ((4, 2), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]


def _case(seed):
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[int(rng.integers(len(MESHES)))]
    m, k, n = (int(rng.choice([4, 8, 16])) for _ in range(3))
    shared = str(rng.choice(names))
    x_spec = [shared, None]
    w_spec = [None, None]
    w_spec[int(rng.integers(2))] = shared  # the contracted dim, or the free one
    x_shape = (m, k)
    if rng.random() < 0.3:  # a leading dim nothing splits
        x_shape, x_spec = (2, m, k), [None, shared, None]
    swapped = bool(rng.random() < 0.3)  # w's free dim first: w.T @ x.T
    return mesh_shape, names, [x_shape, (k, n)], [tuple(x_spec), tuple(w_spec)], swapped


CASES = [_case(seed) for seed in range(24)]


def _run(runner, mod, case):
    mesh_shape, names, shapes, specs, swapped = case
    mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
    rng = np.random.default_rng(5)
    args = [mod.device_put(rng.standard_normal(s).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*sp)))
            for s, sp in zip(shapes, specs)]
    if swapped:
        def fun(x, w):
            return mod.numpy.einsum("kn,...mk->...nm", w, x)
    else:
        def fun(x, w):
            return x @ w
    with mod.set_mesh(mesh):
        return runner(mod, fun, args)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}{'-swapped' if c[4] else ''}" for c in CASES])
def test_grouped_contraction_moves_blocks_as_xla(case):
    assert_like_jax(lambda runner, mod: _run(runner, mod, case), rtol=2e-5, atol=2e-5)


def test_cases_cover_both_ways():
    """The cases exercise the gather through idle axes and the all-reduce over them."""
    import jax  # noqa: F401  (the oracle's 8 devices)
    from auto_oracle import run_jax
    kinds = set()
    for case in CASES:
        _, coll, _ = _run(run_jax, jax, case)
        permuted = any(k[0] == "collective-permute" for k in coll)
        if permuted:
            kinds.update(k[0] for k in coll if k[0] != "collective-permute")
    assert {"all-gather", "all-reduce"} <= kinds


def _batch_case(seed):
    """(mesh shape, names, shapes, specs): x's batch dim split over the mesh's axis of 2, which
    w (larger) splits its contracted dim over; the other axis, of 4, splits nothing."""
    rng = np.random.default_rng(1000 + seed)
    mesh_shape, names = MESHES[seed % 2]
    shared = names[mesh_shape.index(2)]
    batch, i = int(rng.choice([4, 8])), int(rng.choice([4, 8]))
    j, k = int(rng.choice([2, 4, 8])), int(rng.choice([16, 32]))
    return mesh_shape, names, [(batch, i, j), (batch, j, k)], [(shared,), (None, shared)]


BATCH_CASES = [_batch_case(seed) for seed in range(12)]


def _batch_dot(mesh_shape, names, shapes, specs):
    """`run(runner, module)` of the batch dot `bij,bjk->bik` on arguments laid out by `specs`
    over an all-Auto mesh."""
    def run(runner, mod):
        _, args = placed_on_auto_mesh(mod, mesh_shape, names, shapes, specs, seed=5)
        return runner(mod, lambda x, w: mod.numpy.einsum("bij,bjk->bik", x, w), args)
    return run


@pytest.mark.parametrize("case", BATCH_CASES, ids=[f"{c[0]}-{c[2]}" for c in BATCH_CASES])
def test_batched_operand_retiled_to_batch_blocks(case):
    """w's blocks move with one collective-permute, pieces of half its block (its contracted
    dim over a major half of the idle axis), and are gathered over that half."""
    mesh_shape, names, shapes, specs = case

    run = _batch_dot(mesh_shape, names, shapes, specs)
    j_coll = assert_like_jax(run)
    idle = names[mesh_shape.index(4)]
    piece = int(np.prod(shapes[1]))  # bytes of a quarter of w (float32): over the shared axis and half the idle one
    assert j_coll == {("collective-permute", names, piece): 1, ("all-gather", (idle,), piece): 1}


def _free_split_case(seed):
    """(mesh shape, names, shapes, specs): x and the larger w both laid out (batch axis,
    shared axis): x's free dim and w's contracted dim over the shared axis."""
    rng = np.random.default_rng(1100 + seed)
    mesh_shape, names = MESHES[seed % 3]
    batch_axis, shared = (str(n) for n in rng.permutation(names)[:2])
    i, j, k = int(rng.choice([4, 8])), int(rng.choice([8, 16])), int(rng.choice([16, 32]))
    return mesh_shape, names, [(16, i, j), (16, j, k)], [(batch_axis, shared), (batch_axis, shared)]


FREE_SPLIT_CASES = [_free_split_case(seed) for seed in range(12)]


@pytest.mark.parametrize("case", FREE_SPLIT_CASES, ids=[f"{c[0]}-{c[2]}-{c[3][0]}" for c in FREE_SPLIT_CASES])
def test_batched_result_keeps_free_split(case):
    """The result is laid out as x; w is gathered over the shared axis, or, where an axis
    splits nothing, its pieces over that axis are permuted and the partial results
    all-reduced over it."""
    mesh_shape, names, shapes, specs = case

    run = _batch_dot(mesh_shape, names, shapes, specs)
    j_coll = assert_like_jax(run)
    j_specs, _, _ = run(run_jax, jax)
    assert [normalized(sp) for sp in j_specs] == [specs[0]]
    idle = [n for n in names if n not in specs[0]]
    kinds = {(kind, axes) for kind, axes, _ in j_coll}
    if idle:
        assert kinds == {("collective-permute", names), ("all-reduce", tuple(idle))}
    else:
        assert kinds == {("all-gather", (specs[0][1],))}
