"""Shardy propagates shardings through elementwise operations, reshapes and transposes to a
fixed point before any other operation (its op-priority propagation): a value that a
cumulative sum or pad computes takes the layout an elementwise use gives it before the
layout of its own operand reaches it. Random programs `f(x) + y` on Auto meshes, with `f`
such an operation and `x`, `y` laid out over the same axes on different dims, against
XLA's compiled programs: result shardings and values."""
import numpy as np
import pytest

from auto_oracle import normalized, run_jax, run_meshsim

MESHES = [((8,), ("X",)), ((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]


def _case(seed):
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[int(rng.integers(len(MESHES)))]
    rank = int(rng.integers(2, 4))
    shape = [int(rng.choice([8, 16])) for _ in range(rank)]
    dx, dy = (int(d) for d in rng.choice(rank, 2, replace=False))
    axes = tuple(str(a) for a in rng.permutation(names)[:int(rng.integers(1, len(names) + 1))])
    entry = axes[0] if len(axes) == 1 else axes
    x_spec, y_spec = [None] * rank, [None] * rank
    x_spec[dx] = y_spec[dy] = entry
    free = [d for d in range(rank) if d not in (dx, dy)] or [dy]
    op = str(rng.choice(["cumsum", "pad"]))
    axis = int(rng.choice(free))
    return mesh_shape, names, tuple(shape), tuple(x_spec), tuple(y_spec), op, axis


CASES = [_case(seed) for seed in range(16)]


def _program(op, axis, rank):
    def f(mod, x, y):
        if op == "cumsum":
            fx = mod.numpy.cumsum(x, axis=axis)
        else:  # a pad and a slice back: the shape stays, the pad's dim is a permutation factor
            widths = [(0, 0)] * rank
            widths[axis] = (1, 1)
            fx = mod.lax.slice_in_dim(mod.numpy.pad(x, widths), 1, x.shape[axis] + 1, axis=axis)
        return mod.numpy.tanh(fx) + y
    return f


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}{c[6]}" for c in CASES])
def test_elementwise_layouts_propagate_first(case):
    mesh_shape, names, shape, x_spec, y_spec, op, axis = case
    fun = _program(op, axis, len(shape))
    outcomes = []
    for runner, mod in ((run_jax, __import__("jax")), (run_meshsim, __import__("meshsim"))):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        P = mod.sharding.PartitionSpec
        rng = np.random.default_rng(1)
        args = [mod.device_put(rng.standard_normal(shape).astype(np.float32),
                               mod.sharding.NamedSharding(mesh, P(*spec))) for spec in (x_spec, y_spec)]
        with mod.set_mesh(mesh):
            outcomes.append(runner(mod, lambda x, y, mod=mod: fun(mod, x, y), args))
    (j_specs, _, j_out), (m_specs, _, m_out) = outcomes
    np.testing.assert_allclose(np.asarray(m_out), np.asarray(j_out), rtol=2e-5, atol=2e-5)
    assert [normalized(s) for s in m_specs] == [normalized(s) for s in j_specs]
