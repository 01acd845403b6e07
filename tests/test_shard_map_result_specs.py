"""How a shard_map's results name their sharding, against JAX 0.10.2 (8 CPU devices): under jit,
a result laid out over Explicit axes only is named by its type, one entry per dimension
(`P('sp', None)`), while an eager shard_map's result and a layout over Auto axes keep the
out_specs as written; make_jaxpr prints the out_specs as written either way."""
import zlib

import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _data(shape, name):
    return np.random.default_rng(zlib.crc32(name.encode())).uniform(-2, 2, shape).astype(np.float32)


CASES = {
    # name: (axis types of ('sp', 'tp'), operand spec, in_specs, out_specs, body, shape)
    "explicit_rows": ("EE", ("sp",), ("sp",), ("sp",), lambda jax: lambda b: b * 2, (8, 4)),
    "explicit_both": ("EE", ("sp", "tp"), ("sp", "tp"), ("sp", "tp"), lambda jax: lambda b: b + 1, (8, 4)),
    "explicit_rank3": ("EE", ("sp",), ("sp",), ("sp",), lambda jax: lambda b: -b, (8, 2, 2)),
    "explicit_psum": ("EE", ("sp",), ("sp",), (), lambda jax: lambda b: jax.lax.psum(b, "sp"), (8, 4)),
    "explicit_cols": ("EE", (None, "tp"), (None, "tp"), (None, "tp"), lambda jax: lambda b: b * b, (8, 4)),
    "mixed_explicit_out": ("EA", ("sp",), ("sp",), ("sp",), lambda jax: lambda b: b * 3, (8, 4)),
    "mixed_auto_in_out": ("EA", ("sp",), (("sp", "tp"),), (("sp", "tp"),), lambda jax: lambda b: b, (8, 4)),
    "auto_only": ("AA", None, ("sp",), ("sp",), lambda jax: lambda b: b * 2, (8, 4)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_sharding_names(libs, name):
    types, operand_spec, in_spec, out_spec, body, shape = CASES[name]
    x = _data(shape, name)

    def case(jax):
        AxisType = jax.sharding.AxisType
        P = jax.sharding.PartitionSpec
        kinds = {"E": AxisType.Explicit, "A": AxisType.Auto}
        mesh = jax.make_mesh((4, 2), ("sp", "tp"), axis_types=tuple(kinds[t] for t in types))
        with jax.set_mesh(mesh):
            arg = x if operand_spec is None else jax.device_put(x, P(*operand_spec))
            f = jax.shard_map(body(jax), in_specs=P(*in_spec), out_specs=P(*out_spec))
            eager, jitted = f(arg), jax.jit(f)(arg)
            chained = jax.jit(lambda v: f(v) * 2)(arg)
            jaxpr = str(jax.make_jaxpr(jax.jit(f))(arg))
            out_specs_line = [line.strip() for line in jaxpr.splitlines() if "out_specs=" in line]
            return (np.asarray(jitted), np.asarray(eager),
                    [(str(jax.typeof(r)), str(jax.typeof(r).sharding.spec), str(r.sharding))
                     for r in (eager, jitted, chained)], out_specs_line)

    ours, theirs = (case(lib) for lib in libs)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    assert ours[2] == theirs[2]
    assert ours[3] == theirs[3]
