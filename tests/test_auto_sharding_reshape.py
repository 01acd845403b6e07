"""Reshapes over Auto axes as Shardy propagates them: a dim split into several
(or merged from several) is made of one factor per part, so each part takes the
axes of the whole dim that fall to it and the reshape stays local when the
blocks allow it. Result shardings and collectives are compared with the text of
XLA's compiled program."""
import numpy as np
import pytest

import jax
import meshsim
from auto_oracle import normalized, run_jax, run_meshsim

MESH3 = ((2, 2, 2), ("X", "Y", "Z"))
MESH2 = ((2, 4), ("X", "Y"))
# (mesh, shape, spec, program)
CASES = [
    (MESH3, (4,), (("Y", "Z"),), ("split", lambda np_, x: np_.reshape(x, (2, 2)) * 2.0)),
    (MESH3, (16,), (("X", "Y", "Z"),), ("split_merge", lambda np_, x: np_.reshape(np_.reshape(x, (2, 8)) + 1.0, (16,)))),
    (MESH3, (16, 2, 8), ("X", "Z", "Y"), ("keepdims", lambda np_, x: np_.reshape(np_.max(x, axis=2, keepdims=True), (16, 2)))),
    (MESH3, (2, 8), ("X", ("Y", "Z")), ("merge", lambda np_, x: np_.reshape(x, (16,)) * 3.0)),
    (MESH3, (2, 2, 4), ("X", "Y", "Z"), ("merge_three", lambda np_, x: np_.reshape(x, (16,)))),
    (MESH3, (4, 8), ("X", "Y"), ("merge_strided", lambda np_, x: np_.reshape(x, (32,)))),
    (MESH2, (8, 4), (("X", "Y"),), ("split_two_axes", lambda np_, x: np_.reshape(x, (2, 4, 4)))),
    # Reshapes of reshapes, folded into one before partitioning (none when back to the shape).
    (MESH3, (4, 4, 2), (None, "Z", "Y"), ("merge_split_back", lambda np_, x: np_.reshape(np_.reshape(x, (16, 2)), (4, 4, 2)).T)),
    (MESH3, (2, 8, 4), ("X", "Y", "Z"), ("merge_split_back_chain", lambda np_, x: np_.reshape(np_.reshape(np_.reshape(x, (16, 4)), (64,)), (2, 8, 4)) * 2.0)),
    (MESH2, (8, 4), ("X", "Y"), ("merge_then_split_other", lambda np_, x: np_.reshape(np_.reshape(x, (32,)), (2, 4, 4)) + 1.0)),
    (MESH3, (16, 4), ("X", "Y"), ("regroup_not_folded", lambda np_, x: np_.reshape(np_.reshape(x, (64,)), (4, 16)))),
    # A part that an axis does not divide: Shardy splits the axis into sub-axes (Y:(1)2 on
    # one part, Y:(2)2 on the next); the result leaves as P('X'), gathered over Y:(2)2 then
    # Y:(1)2 (tests/test_auto_sharding_sub_axes.py has more).
    (MESH2, (16,), (("X", "Y"),), ("split_uneven", lambda np_, x: np_.reshape(x, (4, 4)) - 1.0)),
]


def _run(runner, mod, case):
    (mesh_shape, names), shape, spec, (_, fun) = case
    mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
    value = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    x = mod.device_put(value, mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*spec)))
    with mod.set_mesh(mesh):
        return runner(mod, lambda a: fun(mod.numpy, a), [x])


@pytest.mark.parametrize("case", CASES, ids=[c[3][0] for c in CASES])
def test_reshape_partitioned_as_xla(case):
    j_specs, j_coll, j_out = _run(run_jax, jax, case)
    m_specs, m_coll, m_out = _run(run_meshsim, meshsim, case)
    np.testing.assert_allclose(np.asarray(m_out), np.asarray(j_out), rtol=1e-6)
    assert [normalized(s) for s in m_specs] == [normalized(s) for s in j_specs]
    assert m_coll == j_coll
