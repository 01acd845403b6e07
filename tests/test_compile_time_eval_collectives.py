"""Collectives inside `jax.ensure_compile_time_eval` in a shard_map body, as JAX 0.10.2 has them:
an axis_index there runs at once and has no device to read, so it raises JAX's NameError and
the mesh stays usable; a psum of a known value is the value times the axes' size. (flax's
partial evaluator, which records an axis_index instead, is tests/programs/
flax_linen_pipeline_scan.py.) Real JAX is the oracle."""
import numpy as np
import pytest

import meshsim


def _program(lib, shape, axis, reduced):
    P = lib.sharding.PartitionSpec
    mesh = lib.make_mesh(shape, ("i", "j"), axis_types=(lib.sharding.AxisType.Auto,) * 2)

    def indexed(x):
        with lib.ensure_compile_time_eval():
            index = lib.lax.axis_index(axis)
        return x + index

    def summed(x):
        with lib.ensure_compile_time_eval():
            total = lib.lax.psum(lib.numpy.float32(1.5), reduced)
        return x * total

    return (lib.shard_map(indexed, mesh=mesh, in_specs=P("i"), out_specs=P("i")),
            lib.shard_map(summed, mesh=mesh, in_specs=P("i"), out_specs=P("i")))


def _outcome(call, x):
    try:
        return "value", np.asarray(call(x))
    except Exception as e:  # noqa: BLE001 - the class and text are compared
        return type(e).__name__, str(e)


@pytest.mark.parametrize("seed", range(4))
def test_collectives_at_compile_time_in_a_shard_map_body(real_jax, seed):
    rng = np.random.default_rng(seed)
    shape = [(4, 2), (2, 4), (8, 1), (2, 2)][seed]
    axis = str(rng.choice(["i", "j"]))
    reduced = tuple(rng.permutation(["i", "j"])[: int(rng.integers(1, 3))])
    x = rng.standard_normal(shape[0] * 3).astype(np.float32)
    results = []
    for lib in (meshsim, real_jax):
        indexed, summed = _program(lib, shape, axis, reduced)
        results.append([_outcome(f, x) for f in (indexed, lib.jit(indexed), summed, lib.jit(summed))]
                       + [_outcome(lib.jit(summed), x + 1)])
    for ours, theirs in zip(*results):
        assert ours[0] == theirs[0]
        if ours[0] == "value":
            np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
        else:
            assert ours[1] == theirs[1]
