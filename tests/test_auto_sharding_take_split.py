"""A `take` along a dim split over some axes whose result is laid out, by a later contraction,
over its pass-through dim's axes and those: `jnp.take(tanh(x), i, axis=0) @ w` with `x: P('A',
'B')` and `w: P(('B', 'A'))`. XLA's partitioner keeps the operand's split: each device looks up
the indices in its block over A, the partial results are all-reduced over A, and the result is
sliced to its `('B', 'A')` layout afterwards; meshsim moved A to the pass-through dim first (an
all-to-all). Random meshes, shapes and index counts against XLA's compiled programs: values,
result shardings and collectives."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

MESHES = [((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]


def _case(seed):
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[int(rng.integers(len(MESHES)))]
    a, b = (str(n) for n in rng.permutation(names)[:2])
    rows, cols, out = (int(rng.choice([8, 16, 32])) for _ in range(3))
    count = int(rng.integers(1, 6))
    return mesh_shape, names, (rows, cols, out, count), (a, b)


CASES = [_case(seed) for seed in range(16)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES])
def test_take_keeps_the_indexed_split_and_slices_its_result(case):
    mesh_shape, names, (rows, cols, out, count), (a, b) = case

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        P = mod.sharding.PartitionSpec
        rng = np.random.default_rng(3)
        x = mod.device_put(rng.standard_normal((rows, cols)).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, P(a, b)))
        w = mod.device_put(rng.standard_normal((cols, out)).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, P((b, a))))
        idx = rng.integers(-rows, rows, size=count)
        jnp = mod.numpy
        with mod.set_mesh(mesh):
            return runner(mod, lambda u, v: jnp.take(jnp.tanh(u), idx, axis=0) @ v, [x, w])
    assert_like_jax(run)


def _idle_case(seed):
    """A take along a dim split over axis A, its result contracted along its last dim with an
    operand split there over A too; the other mesh axes split nothing."""
    rng = np.random.default_rng(100 + seed)
    mesh_shape, names = MESHES[int(rng.integers(len(MESHES)))]
    a = str(rng.choice(names))
    batch, rows, cols, out = (int(rng.choice([2, 4])), int(rng.choice([4, 8, 16])),
                              int(rng.choice([8, 16, 32])), int(rng.choice([2, 4])))
    return mesh_shape, names, (batch, rows, cols, out, int(rng.integers(1, 6))), a


IDLE_CASES = [_idle_case(seed) for seed in range(16)]


@pytest.mark.parametrize("case", IDLE_CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in IDLE_CASES])
def test_take_computes_its_pass_through_dim_over_idle_axes(case):
    """XLA splits the take's pass-through dim over the axes nothing uses, into no more blocks than
    the result's layout has (over the major sub-axis of an idle axis larger than that, `X:(1)2`),
    so the all-reduce of the partial results moves smaller blocks, and permutes them to the
    result's layout after."""
    mesh_shape, names, (batch, rows, cols, out, count), a = case

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        P = mod.sharding.PartitionSpec
        rng = np.random.default_rng(5)
        x = mod.device_put(rng.standard_normal((batch, rows, cols)).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, P(None, a)))
        w = mod.device_put(rng.standard_normal((batch, cols, out)).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, P(None, a)))
        idx = rng.integers(-rows, rows, size=count)
        jnp = mod.numpy
        with mod.set_mesh(mesh):
            return runner(mod, lambda u, v: jnp.einsum("bik,bkj->bij", jnp.take(u, idx, axis=1), v), [x, w])
    assert_like_jax(run)
