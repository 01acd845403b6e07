"""Concatenation along a dim split over Auto mesh axes, against XLA's compiled programs: XLA
moves the dim's axes to another dim whose blocks they divide (an all-to-all of each operand),
concatenates the blocks and moves the axes back (an all-to-all of the result); with no such dim
it gathers the operands. meshsim records the same collectives (kind, axes, bytes)."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

# name -> (mesh shape, axis names, shape, spec, concatenated dim)
CASES = {
    "rows_small": ((4, 2), ("X", "Y"), (2, 2), ("Y",), 0),
    "rows": ((4, 2), ("X", "Y"), (8, 8), ("X",), 0),
    "rows_8": ((8,), ("X",), (8, 8), ("X",), 0),
    "cols": ((4, 2), ("X", "Y"), (8, 8), (None, "X"), 1),
    "both_split": ((4, 2), ("X", "Y"), (8, 8), ("X", "Y"), 0),
    "last_of_3": ((4, 2), ("X", "Y"), (4, 2, 8), (None, None, "Y"), 2),
    "no_room": ((4, 2), ("X", "Y"), (8, 2), ("X",), 0),  # gathered: 2 columns over 4 devices
    "one_dim": ((4, 2), ("X", "Y"), (8,), ("X",), 0),  # gathered
}


def _run(runner, mod, name):
    mesh_shape, names, shape, spec, axis = CASES[name]
    mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
    value = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    x = mod.device_put(value, mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*spec)))
    with mod.set_mesh(mesh):
        return runner(mod, lambda a: mod.numpy.sin(mod.numpy.concatenate([a, a * 2.0], axis)), [x])


@pytest.mark.parametrize("name", CASES)
def test_concatenate_matches_xla(name):
    j_coll = assert_like_jax(lambda runner, mod: _run(runner, mod, name), rtol=1e-6, atol=1e-6)
    kinds = {k[0] for k in j_coll}
    assert kinds == ({"all-gather"} if name in ("no_room", "one_dim") else {"all-to-all"})
