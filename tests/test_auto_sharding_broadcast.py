"""A broadcast operand laid out against its result: `x + b` with a bias `b` split over axes
that neither include nor extend those propagation gives the sum's dim (`b: P(('X', 'Y'))`
against `x: P(None, 'Y')`). XLA's partitioner moves `b` to the result's layout of that dim
(here a collective-permute onto a finer layout and an all-gather over X) rather than
gathering it whole. Random bias adds on Auto meshes against XLA's compiled programs: result
shardings, values and collectives."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

MESHES = [((8,), ("X",)), ((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]


def _entry(axes):
    return None if not axes else axes[0] if len(axes) == 1 else tuple(axes)


def _case(seed):
    """x of rank 2-3 with its last dim split over some axes (perhaps others on other dims),
    b over the last dim's size split over axes that conflict with x's (neither a prefix of
    the other)."""
    rng = np.random.default_rng(seed)
    while True:
        mesh_shape, names = MESHES[1 + int(rng.integers(len(MESHES) - 1))]
        rank = int(rng.integers(2, 4))
        shape = tuple(int(rng.choice([8, 16])) for _ in range(rank))
        axes = [str(a) for a in rng.permutation(names)]
        x_last = axes[:int(rng.integers(1, len(axes) + 1))]
        b_axes = [str(a) for a in rng.permutation(names)][:int(rng.integers(1, len(names) + 1))]
        if b_axes[:len(x_last)] == x_last or x_last[:len(b_axes)] == b_axes:
            continue
        x_spec = [None] * rank
        x_spec[-1] = _entry(x_last)
        rest = [a for a in axes if a not in x_last]
        if rest and rng.integers(2):
            x_spec[int(rng.integers(rank - 1))] = rest[0]
        return mesh_shape, names, shape, tuple(x_spec), (_entry(b_axes),)


CASES = [_case(seed) for seed in range(20)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}" for c in CASES])
def test_bias_split_against_its_sum_moves_to_the_sum_layout(case):
    mesh_shape, names, shape, x_spec, b_spec = case

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        P = mod.sharding.PartitionSpec
        rng = np.random.default_rng(1)
        x = mod.device_put(rng.standard_normal(shape).astype(np.float32), mod.sharding.NamedSharding(mesh, P(*x_spec)))
        b = mod.device_put(rng.standard_normal(shape[-1:]).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, P(*b_spec)))
        with mod.set_mesh(mesh):
            return runner(mod, lambda a, c: mod.numpy.tanh(a) + c, [x, b])
    assert_like_jax(run, rtol=1e-5, atol=1e-5)
