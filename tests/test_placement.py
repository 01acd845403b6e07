"""Placement as JAX 0.10.2 keeps it, with JAX as the oracle: arrays committed to a device keep it
through eager and jitted ops, committed arrays on different devices cannot meet,
`with_sharding_constraint` on Explicit meshes, `use_abstract_mesh` inside jit, and
`typeof(x).manual_axis_type`."""
import numpy as np
import pytest

import meshsim
from outcomes import outcome


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _ids(x):
    return sorted(d.id for d in x.devices())


def _put(jax, value, device):
    return jax.device_put(np.asarray(value, np.float32), jax.devices()[device])


def _summary(y):
    return _ids(y), str(y.dtype), y.shape, bool(y.committed), np.asarray(y).tolist()


PLACED = {
    "eager_unary": lambda jax, x, z: jax.numpy.sin(x),
    "eager_binary_scalar": lambda jax, x, z: x * 2,
    "eager_with_uncommitted": lambda jax, x, z: x + jax.numpy.ones(4),
    "eager_uncommitted_first": lambda jax, x, z: jax.numpy.arange(4.0) - x,
    "eager_reduction": lambda jax, x, z: x.sum(),
    "eager_chain": lambda jax, x, z: jax.numpy.exp(x * 2 - 1)[1:],
    "jit": lambda jax, x, z: jax.jit(lambda a: a * 2 + 1)(x),
    "jit_with_uncommitted": lambda jax, x, z: jax.jit(lambda a, b: a @ b)(x, jax.numpy.ones(4)),
    "jit_pytree": lambda jax, x, z: jax.jit(lambda p: p["a"] - p["b"])({"a": x, "b": x}),
    "grad": lambda jax, x, z: jax.grad(lambda a: (a ** 2).sum())(x),
    "device_put_again": lambda jax, x, z: jax.device_put(x, jax.devices()[1]),
    "device_put_none": lambda jax, x, z: jax.device_put(x),
    "same_device": lambda jax, x, z: x + jax.device_put(x * 1, jax.devices()[3]),
    # committed to different devices
    "eager_add_mixed": lambda jax, x, z: x + z,
    "eager_mul_mixed": lambda jax, x, z: z * x,
    "jit_mixed": lambda jax, x, z: jax.jit(lambda a, b: a + b)(x, z),
    "jit_mixed_varargs": lambda jax, x, z: jax.jit(lambda *a: a[0] + a[1])(x, z),
    "jit_mixed_pytree": lambda jax, x, z: jax.jit(lambda p: p["a"] + p["b"])({"a": x, "b": z}),
    "jit_mixed_after_scalar": lambda jax, x, z: jax.jit(lambda a, b, c: a + b + c)(1.0, x, z),
    "jit_device0_committed": lambda jax, x, z: jax.jit(lambda a, b: a + b)(
        x, jax.device_put(jax.numpy.ones(4), jax.devices()[0])),
}


@pytest.mark.parametrize("name", sorted(PLACED))
def test_committed_device_is_kept_or_mixing_fails_as_in_jax(libs, name):
    def case(jax):
        x = _put(jax, [0.5, 1.0, 2.0, 3.0], 3)
        z = _put(jax, [1.0, 1.0, 2.0, 2.0], 5)
        return _summary(PLACED[name](jax, x, z))

    ours, theirs = (outcome(case, lib) for lib in libs)
    if ours[0] == theirs[0] == "ok":
        assert ours[1][:4] == theirs[1][:4]
        np.testing.assert_allclose(ours[1][4], theirs[1][4], rtol=1e-6)
    else:
        assert ours == theirs


def test_mixing_a_device_with_a_mesh_fails_as_in_jax(libs):
    def case(jax):
        mesh = jax.make_mesh((4, 2), ("dp", "tp"))
        a = jax.device_put(np.ones((4, 2), np.float32), jax.sharding.NamedSharding(
            mesh, jax.sharding.PartitionSpec("dp")))
        x = _put(jax, np.ones(4), 3)
        return float(jax.jit(lambda p, q: p.sum() + q.sum())(x, a))

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs and ours[0] == "ValueError"


# with_sharding_constraint under an all-Explicit context mesh (a = f32[4@dp,2])
CONSTRAINTS = {
    "same_spec": lambda m, a: m.lax.with_sharding_constraint(a, m.P("dp")),
    "same_spec_padded": lambda m, a: m.lax.with_sharding_constraint(a, m.P("dp", None)),
    "same_named": lambda m, a: m.lax.with_sharding_constraint(a, m.NS(m.mesh, m.P("dp"))),
    "jit_same": lambda m, a: m.jax.jit(lambda v: m.lax.with_sharding_constraint(v, m.P("dp")))(a),
    "tuple_of_values": lambda m, a: m.lax.with_sharding_constraint((a, a), m.P("dp"))[1],
    "other_spec": lambda m, a: m.lax.with_sharding_constraint(a, m.P("tp")),
    "jit_other_spec": lambda m, a: m.jax.jit(lambda v: m.lax.with_sharding_constraint(v, m.P(None, "tp")))(a),
    "replicated_wanted_sharded": lambda m, a: m.lax.with_sharding_constraint(m.jnp.ones(8), m.P("dp")),
    "unknown_axis": lambda m, a: m.lax.with_sharding_constraint(a, m.P("xx")),
    "jit_unknown_axis": lambda m, a: m.jax.jit(lambda v: m.lax.with_sharding_constraint(v, m.P("xx")))(a),
    "too_long": lambda m, a: m.lax.with_sharding_constraint(a, m.P("dp", None, None)),
    "duplicate": lambda m, a: m.lax.with_sharding_constraint(a, m.P("dp", "dp")),
    "single_device": lambda m, a: m.lax.with_sharding_constraint(
        a, m.jax.sharding.SingleDeviceSharding(m.jax.devices()[0])),
    "not_a_sharding": lambda m, a: m.lax.with_sharding_constraint(a, 3),
}


class _Lib:
    def __init__(self, jax):
        self.jax, self.jnp, self.lax = jax, jax.numpy, jax.lax
        self.P, self.NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
        self.mesh = jax.make_mesh((4, 2), ("dp", "tp"))


@pytest.mark.parametrize("name", sorted(CONSTRAINTS))
def test_with_sharding_constraint_on_explicit_mesh_matches_jax(libs, name):
    def case(jax):
        m = _Lib(jax)
        a = jax.device_put(np.arange(8, dtype=np.float32).reshape(4, 2), m.NS(m.mesh, m.P("dp")))
        with jax.set_mesh(m.mesh):
            y = CONSTRAINTS[name](m, a)
            return str(jax.typeof(y)), np.asarray(y).tolist()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs


def test_with_sharding_constraint_without_a_mesh_matches_jax(libs):
    def case(jax):
        return str(jax.typeof(jax.lax.with_sharding_constraint(jax.numpy.ones(4),
                                                               jax.sharding.PartitionSpec())))

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs and ours[0] == "RuntimeError"


def test_manual_axis_type_matches_jax(libs):
    def case(jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((4, 2), ("dp", "tp"))
        seen = [repr(jax.typeof(jax.numpy.zeros(3)).manual_axis_type)]

        def body(v):
            seen.append(repr(jax.typeof(v).manual_axis_type))
            s = jax.lax.psum(v, "dp")
            seen.append(repr(jax.typeof(s).manual_axis_type))
            seen.append(sorted(jax.typeof(v).manual_axis_type.varying))
            return v

        a = jax.device_put(np.ones((4, 2), np.float32), jax.sharding.NamedSharding(mesh, P("dp", "tp")))
        jax.shard_map(body, mesh=mesh, in_specs=P("dp", "tp"), out_specs=P("dp", "tp"))(a)
        empty = jax.typeof(jax.numpy.zeros(3)).manual_axis_type
        seen.append(empty == jax.sharding.ManualAxisType())
        seen.append(hash(empty) == hash(jax.sharding.ManualAxisType()))
        return seen

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs


def test_use_abstract_mesh_inside_jit_matches_jax(libs):
    def case(jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((4, 2), ("dp", "tp"))
        a = jax.device_put(np.arange(8, dtype=np.float32).reshape(4, 2),
                           jax.sharding.NamedSharding(mesh, P("dp")))

        def f(v):
            with jax.sharding.use_abstract_mesh(jax.sharding.get_abstract_mesh()):
                return jax.numpy.zeros((4,), out_sharding=P("dp")) + v.sum()

        with jax.set_mesh(mesh):
            y = jax.jit(f)(a)
        return str(jax.typeof(y)), np.asarray(y).tolist()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs and ours[0] == "ok"
