"""How XLA partitions a contraction whose operands are not all laid out alike
over Auto axes: the operand sharded on the contracted dim is all-gathered, or
the other operands are sliced and the partial results all-reduced. XLA does
not weigh bytes alone: it gathers when a result is laid out over the
contracted dim's axes or when the operands' layouts leave devices computing
the same blocks. meshsim must choose as XLA's compiled program does (result
shardings and collectives read from its text)."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

MM = ("mm", lambda a, b: a @ b)
MM_BIAS = ("mm_bias", lambda a, b, c: a @ b + c)
# (mesh shape, shapes, specs, program)
CASES = [
    ((4, 2), [(16,), (16, 8)], [("X",), ()], MM),
    ((4, 2), [(1, 16), (16, 2)], [(None, "X"), ()], MM),
    ((4, 2), [(16, 16), (16, 2)], [(None, "X"), ()], MM),
    ((4, 2), [(8, 16), (16, 32)], [(None, "X"), ()], MM),
    ((4, 2), [(8, 16), (16, 8)], [("Y", "X"), ()], MM),
    ((4, 2), [(8, 16), (16, 8)], [(None, "X"), (None, "Y")], MM),
    ((4, 2), [(8, 16), (16, 8)], [(None, "X"), ("X",)], MM),
    ((4, 2), [(8, 16), (16, 8)], [(None, "X"), ("X", "Y")], MM),
    ((4, 2), [(8, 16), (16, 8)], [(None, "X"), ("Y",)], MM),
    ((4, 2), [(8, 16), (16, 8)], [(None, ("X", "Y")), ()], MM),
    ((4, 2), [(16,), (16, 8)], [("X",), ("X",)], MM),
    ((4, 2), [(16,), (16, 8)], [("X",), (None, "Y")], MM),
    ((4, 2), [(16,), (16, 8)], [("X",), (None, "X")], MM),
    ((4, 2), [(16,), (16, 8), (8,)], [("X",), (), ("X",)], MM_BIAS),
    ((4, 2), [(16,), (16, 8), (8,)], [("X",), (), ("Y",)], MM_BIAS),
    ((4, 2), [(8, 16), (16, 8), (8, 8)], [(None, "X"), (), ("Y",)], MM_BIAS),
    ((8,), [(16,), (16, 8), (8,)], [("X",), (), ("X",)], MM_BIAS),
    ((8,), [(4, 8), (8, 16)], [(None, "X"), ()], MM),
    ((2, 4), [(8, 16, 2), (2, 16)], [("Y",), ("X",)], MM),
    ((2, 4), [(2, 2, 4), (4, 16)], [(None, None, "Y"), (None, "X")], MM),
]


def _run(runner, mod, case):
    mesh_shape, shapes, specs, (_, fun) = case
    names = ("X", "Y")[:len(mesh_shape)]
    mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
    rng = np.random.default_rng(3)
    args = [mod.device_put(rng.standard_normal(s).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*sp)))
            for s, sp in zip(shapes, specs)]
    with mod.set_mesh(mesh):
        return runner(mod, fun, args)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[3][0]}-{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_contraction_partitioned_as_xla(case):
    assert_like_jax(lambda runner, mod: _run(runner, mod, case))
