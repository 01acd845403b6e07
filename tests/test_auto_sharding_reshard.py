"""Reshards that move whole blocks between devices, against XLA's compiled programs: where
the old and new layouts cut every dimension into the same number of blocks (only the devices
holding them differ), XLA's partitioner sends each block with one collective-permute over
every device, those keeping theirs included; where one dim's blocks move to another dim
(other dims perhaps gathered whole), an all-to-all re-tiles them and a collective-permute
takes them to the new devices. meshsim records the same (kind, axes, bytes)."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

# name -> (mesh shape, axis names, shape, argument spec, target spec)
CASES = {
    "tuple_order": ((4, 2), ("X", "Y"), (16,), (("X", "Y"),), (("Y", "X"),)),
    "swap_dims": ((2, 2, 2), ("X", "Y", "Z"), (8, 8), ("X", "Y"), ("Y", "X")),
    "other_axis": ((2, 2, 2), ("X", "Y", "Z"), (8, 8), ("X",), ("Z",)),
    "other_axis_dim1": ((2, 2, 2), ("X", "Y", "Z"), (4, 8, 2), (None, "X"), (None, "Z")),
    "three_axes": ((2, 2, 2), ("X", "Y", "Z"), (8, 4), (("X", "Y", "Z"),), (("Z", "Y", "X"),)),
    "stays_put": ((4, 2), ("X", "Y"), (8, 8), ("X", None), (None, "X")),  # an all-to-all
    # one dim's blocks move to another dim over other devices: an all-to-all, then a permute
    "retile": ((2, 2, 2), ("X", "Y", "Z"), (8, 8), ("X",), (None, "Y")),
    "retile_tuple": ((4, 2), ("X", "Y"), (8, 8), (("X", "Y"),), (None, ("Y", "X"))),
    "retile_and_move": ((2, 2, 2), ("X", "Y", "Z"), (8, 8, 4), ("X", None, "Z"), ("Y", "X")),
    # ... after gathering the other dims that lose their blocks
    "gather_then_retile": ((2, 2, 2), ("X", "Y", "Z"), (8, 4, 8), ("X", "Z"), (None, None, "Y")),
    "gather_then_move": ((2, 2, 2), ("X", "Y", "Z"), (8, 4, 8), ("X", "Z"), (None, None, "Z")),
    "too_few_blocks": ((2, 4), ("X", "Y"), (8, 8), ("X",), (None, "Y")),  # an all-gather
}
NO_PERMUTE = {"stays_put", "gather_then_move", "too_few_blocks"}


def _run(runner, mod, name, explicit):
    mesh_shape, names, shape, spec, target = CASES[name]
    kind = mod.sharding.AxisType.Explicit if explicit else mod.sharding.AxisType.Auto
    mesh = mod.make_mesh(mesh_shape, names, axis_types=(kind,) * len(names))
    P = mod.sharding.PartitionSpec
    value = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    x = mod.device_put(value, mod.sharding.NamedSharding(mesh, P(*spec)))
    move = mod.sharding.reshard if explicit else mod.lax.with_sharding_constraint
    with mod.set_mesh(mesh):
        return runner(mod, lambda a: move(a * 2.0, P(*target)) + 1.0, [x])


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "explicit"])
@pytest.mark.parametrize("name", CASES)
def test_reshard_collectives_match_xla(name, explicit):
    j_coll = assert_like_jax(lambda runner, mod: _run(runner, mod, name, explicit), rtol=0, atol=0)
    permutes = [k for k in j_coll if k[0] == "collective-permute"]
    assert bool(permutes) == (name not in NO_PERMUTE)
