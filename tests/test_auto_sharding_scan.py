"""A cumulative scan along a dim its operand splits, whose result a later elementwise use lays
out along other dims: XLA's partitioner reshards the operand to the result's layout with the
scanned dim whole (an all-to-all, perhaps with a collective-permute) and scans each block,
where gathering the operand whole and slicing the result would move more. Random programs
`cumsum(x, axis) + y` on Auto meshes against XLA's compiled programs: result shardings,
values and collectives."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

MESHES = [((8,), ("X",)), ((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]


def _entry(axes):
    return None if not axes else axes[0] if len(axes) == 1 else tuple(axes)


def _case(seed):
    """x split along the scanned dim over some axes, y along one other dim over axes that
    include those (so the sum's layout takes them from the scanned dim)."""
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[int(rng.integers(len(MESHES)))]
    rank = int(rng.integers(2, 4))
    shape = tuple(int(rng.choice([8, 16])) for _ in range(rank))
    axis, dy = (int(d) for d in rng.choice(rank, 2, replace=False))
    axes = [str(a) for a in rng.permutation(names)]
    scanned = axes[:int(rng.integers(1, len(axes) + 1))]
    y_axes = [str(a) for a in rng.permutation(axes[:len(scanned) + int(rng.integers(len(axes) - len(scanned) + 1))])]
    x_spec, y_spec = [None] * rank, [None] * rank
    x_spec[axis], y_spec[dy] = _entry(scanned), _entry(y_axes)
    return mesh_shape, names, shape, tuple(x_spec), tuple(y_spec), axis


CASES = [_case(seed) for seed in range(20)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}" for c in CASES])
def test_scan_of_a_split_dim_reshards_to_the_result_layout(case):
    mesh_shape, names, shape, x_spec, y_spec, axis = case

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        P = mod.sharding.PartitionSpec
        rng = np.random.default_rng(1)
        x, y = (mod.device_put(rng.standard_normal(shape).astype(np.float32),
                               mod.sharding.NamedSharding(mesh, P(*spec))) for spec in (x_spec, y_spec))
        with mod.set_mesh(mesh):
            return runner(mod, lambda a, b: mod.numpy.cumsum(a, axis=axis) + b, [x, y])
    assert_like_jax(run, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}" for c in CASES])
def test_scan_constrained_along_other_dims_reshards_its_operand(case):
    """The same layouts given by a sharding constraint on the scan's result: Shardy passes the
    constraint's layout to the scan's result as through an elementwise operation, so XLA
    reshards the operand to it and scans each block, as above."""
    mesh_shape, names, shape, x_spec, y_spec, axis = case

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        P = mod.sharding.PartitionSpec
        rng = np.random.default_rng(1)
        x = mod.device_put(rng.standard_normal(shape).astype(np.float32), mod.sharding.NamedSharding(mesh, P(*x_spec)))
        with mod.set_mesh(mesh):
            return runner(mod, lambda a: mod.lax.with_sharding_constraint(mod.numpy.cumsum(a, axis=axis), P(*y_spec)),
                          [x])
    assert_like_jax(run, rtol=1e-4, atol=1e-4)
