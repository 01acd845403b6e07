"""Under a context mesh (`jax.set_mesh`), against JAX 0.10.2: make_jaxpr's text of shard_map
(the context mesh prints as its AbstractMesh, an explicit `mesh=` as the Mesh) and reshard
(no parameters), and with_sharding_constraint's error for shardings that are not a pytree
prefix of the value (every mismatch listed)."""
import pytest

import meshsim


def _mesh(jax, kind):
    types = (getattr(jax.sharding.AxisType, kind),) * 2
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=types)


def _jaxprs(jax, kind):
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    mesh = _mesh(jax, kind)
    texts = []
    with jax.set_mesh(mesh):
        x = jnp.ones((8, 4))
        if kind == "Explicit":
            x = jax.device_put(x, P("x", None))
            texts.append(jax.make_jaxpr(lambda a: jax.reshard(a * 2, P(None, "y")))(x))
            texts.append(jax.make_jaxpr(lambda a: jax.lax.with_sharding_constraint(a, P("x", None)))(x))
        texts.append(jax.make_jaxpr(jax.shard_map(lambda a: a + 1, in_specs=P("x"), out_specs=P("x")))(x))
        texts.append(jax.make_jaxpr(jax.shard_map(lambda a: jax.lax.psum(a, "y"), mesh=mesh,
                                                  in_specs=P("x", None), out_specs=P("x")))(x))
        texts.append(jax.make_jaxpr(jax.shard_map(
            lambda a: a * 2, in_specs=P(), out_specs=P(), axis_names={"y"}))(x))
    return [str(t) for t in texts]


@pytest.mark.parametrize("kind", ["Explicit", "Auto"])
def test_make_jaxpr_under_context_mesh(real_jax, kind):
    ours, theirs = _jaxprs(meshsim, kind), _jaxprs(real_jax, kind)
    for o, t in zip(ours, theirs):
        assert o == t


WSC_CASES = {
    "tuple_too_long": lambda x, P: ((x, x), (P("x"), P("y"), P())),
    "dict_keys": lambda x, P: ({"a": x}, {"b": P("x")}),
    "list_vs_tuple": lambda x, P: ([x, x], (P("x"), P())),
    "nested_type": lambda x, P: ((x, {"w": x}), (P("x"), [P()])),
    "missing_key": lambda x, P: ({"a": x, "b": x}, {"a": P("x")}),
    "nested_length": lambda x, P: ((x, (x, x)), (P("x"), (P(), P(), P()))),
    "two_mismatches": lambda x, P: ((x, (x, x), {"k": x}), (P("x"), (P(),), {"j": P()})),
}


@pytest.mark.parametrize("case", sorted(WSC_CASES))
def test_with_sharding_constraint_prefix_errors(real_jax, case):
    messages = []
    for jax in (meshsim, real_jax):
        with jax.set_mesh(_mesh(jax, "Auto")):
            value, shardings = WSC_CASES[case](jax.numpy.ones((8, 4)), jax.sharding.PartitionSpec)
            with pytest.raises(ValueError) as err:
                jax.jit(lambda a: jax.lax.with_sharding_constraint(a, shardings))(value)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
