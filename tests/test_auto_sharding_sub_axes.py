"""Reshapes whose parts hold only some of a mesh axis's devices, over Auto axes: Shardy splits
the axis into sub-axes (`Y:(1)2` on one part, `Y:(2)2` on the next, core/sub_axes.h), the
operations after compute on those blocks, a reduction all-reduces over the sub-axis its dim
had, and a result leaves with each dim's axes up to its first sub-axis, gathered over the rest
(minor dim first), as JAX reports it. Random meshes, shapes, layouts and programs against the
collectives of XLA's compiled programs: values, result shardings and collectives."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

MESHES = [((8,), ("X",)), ((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]
OPS = ["none", "sin", "sum0", "max1", "scale_sum1"]


def _case(seed):
    """A vector split over one or two mesh axes of 4 or 8 devices, reshaped to (rows, cols)
    where the axes' devices do not divide `rows` evenly into whole axes."""
    rng = np.random.default_rng(200 + seed)
    while True:
        mesh_shape, names = MESHES[int(rng.integers(len(MESHES)))]
        size = dict(zip(names, mesh_shape))
        count = int(rng.integers(1, min(2, len(names)) + 1))
        axes = tuple(str(a) for a in rng.permutation(names)[:count])
        devices = int(np.prod([size[a] for a in axes]))
        rows = int(rng.choice([2, 4, 8]))
        cols = int(rng.choice([2, 4, 8]))
        # Some axis must be cut: a part holds a factor of it, not all of it.
        left, cut = rows, False
        for a in axes:
            if left % size[a] == 0:
                left //= size[a]
            else:
                cut = size[a] % left == 0 and left > 1 and cols % (size[a] // left) == 0
                break
        if cut and (rows * cols) % devices == 0:
            return mesh_shape, names, axes, (rows, cols), str(rng.choice(OPS))


CASES = [_case(seed) for seed in range(20)]


def _program(jnp, op, shape):
    def f(x):
        y = jnp.reshape(x, shape)
        if op == "sin":
            return jnp.sin(y) * 0.5
        if op == "sum0":
            return jnp.sum(jnp.tanh(y), axis=0)
        if op == "max1":
            return jnp.max(y + 1.0, axis=1)
        if op == "scale_sum1":
            return jnp.sum(y * 2.0, axis=1) - 1.0
        return y
    return f


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}" for c in CASES])
def test_reshape_over_sub_axes(case):
    mesh_shape, names, axes, shape, op = case

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        P = mod.sharding.PartitionSpec
        value = np.random.default_rng(9).standard_normal(shape[0] * shape[1]).astype(np.float32)
        x = mod.device_put(value, mod.sharding.NamedSharding(mesh, P(axes)))
        with mod.set_mesh(mesh):
            return runner(mod, _program(mod.numpy, op, shape), [x])
    assert_like_jax(run)
