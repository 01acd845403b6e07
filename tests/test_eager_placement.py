"""Eager placement under a context mesh, against JAX 0.10.2: under `jax.set_mesh`, arrays made
eagerly and every eager or jitted result are committed to the mesh, replicated (`P()` for what a
transfer makes, the type's full-rank spec for a computed result over Explicit axes); arrays
`device_put` without a target stay uncommitted on one device; committed single-device operands
are refused; `with mesh:` places nothing."""
import numpy as np
import pytest

import meshsim

MESHES = {
    "8-E": ((8,), ("x",), ("Explicit",)),
    "8-A": ((8,), ("x",), ("Auto",)),
    "4x2-EE": ((4, 2), ("x", "y"), ("Explicit", "Explicit")),
    "4x2-AA": ((4, 2), ("x", "y"), ("Auto", "Auto")),
    "4x2-EA": ((4, 2), ("x", "y"), ("Explicit", "Auto")),
    "2x2x2-AEA": ((2, 2, 2), ("a", "b", "c"), ("Auto", "Explicit", "Auto")),
    "2-E-of-8": ((2,), ("x",), ("Explicit",)),  # a mesh over devices 0 and 1 only
}

HOST = np.arange(6, dtype=np.float32).reshape(2, 3)

# Each case: (jax, jnp, made-before-the-mesh uncommitted array) -> value(s) made under the mesh.
CASES = {
    "array_list": lambda jax, jnp, pre: jnp.array([1.0, 2.0]),
    "array_host": lambda jax, jnp, pre: jnp.array(HOST),
    "array_of_uncommitted": lambda jax, jnp, pre: jnp.array(pre),
    "asarray_host": lambda jax, jnp, pre: jnp.asarray(HOST),
    "asarray_of_uncommitted": lambda jax, jnp, pre: jnp.asarray(pre),
    "scalar_ctor": lambda jax, jnp, pre: jnp.float32(3),
    "int_ctor": lambda jax, jnp, pre: jnp.int32([1, 2]),
    "zeros": lambda jax, jnp, pre: jnp.zeros((4, 2)),
    "ones_int": lambda jax, jnp, pre: jnp.ones(3, jnp.int32),
    "full": lambda jax, jnp, pre: jnp.full((2, 2), 3.0),
    "arange": lambda jax, jnp, pre: jnp.arange(5),
    "linspace": lambda jax, jnp, pre: jnp.linspace(0, 1, 5),
    "eye": lambda jax, jnp, pre: jnp.eye(3),
    "ones_like_array": lambda jax, jnp, pre: jnp.ones_like(jnp.array([1.0, 2.0])),
    "zeros_like_zeros": lambda jax, jnp, pre: jnp.zeros_like(jnp.zeros(3)),
    "key": lambda jax, jnp, pre: jax.random.key(0),
    "split": lambda jax, jnp, pre: jax.random.split(jax.random.key(1)),
    "PRNGKey": lambda jax, jnp, pre: jax.random.PRNGKey(1),
    "normal": lambda jax, jnp, pre: jax.random.normal(jax.random.key(0), (3,)),
    "uniform": lambda jax, jnp, pre: jax.random.uniform(jax.random.key(1), (2, 3)),
    "add": lambda jax, jnp, pre: pre + 1,
    "sin": lambda jax, jnp, pre: jnp.sin(jnp.array([1.0, 2.0])),
    "sum": lambda jax, jnp, pre: jnp.sum(pre),
    "concat": lambda jax, jnp, pre: jnp.concatenate([pre, pre]),
    "matmul": lambda jax, jnp, pre: jnp.ones((2, 3)) @ jnp.ones((3, 4)),
    "at_set": lambda jax, jnp, pre: pre.at[0].set(5.0),
    "where": lambda jax, jnp, pre: jnp.where(pre > 1, pre, 0.0),
    "tree_map": lambda jax, jnp, pre: jax.tree.map(lambda v: v + 1, {"a": pre})["a"],
    "jit_no_args": lambda jax, jnp, pre: jax.jit(lambda: jnp.ones(3) * 2)(),
    "jit_host": lambda jax, jnp, pre: jax.jit(lambda v: v * 2)(HOST),
    "jit_uncommitted": lambda jax, jnp, pre: jax.jit(lambda v: (v * 2, v.sum()))(pre),
    "grad": lambda jax, jnp, pre: jax.grad(lambda v: jnp.sum(v ** 2))(pre),
    "value_and_grad": lambda jax, jnp, pre: jax.value_and_grad(lambda v: jnp.sum(v ** 2))(pre),
    "device_put_host": lambda jax, jnp, pre: jax.device_put(HOST),
    "device_put_uncommitted": lambda jax, jnp, pre: jax.device_put(pre),
    "device_put_then_add": lambda jax, jnp, pre: jax.device_put(HOST) + 1,
    "uncommitted_unchanged": lambda jax, jnp, pre: pre,
    "optax_like_counter": lambda jax, jnp, pre: jnp.zeros([], jnp.int32) + 1,
    "committed_device_refused": lambda jax, jnp, pre: jax.device_put(HOST, jax.devices()[0]) + 1,
}

# Results JAX names `P()` where meshsim names them by their type (`P(None,)`): the same
# layout, named after JAX's own jitted helpers; on which meshes (axis types) they differ. The
# test checks they still differ only so.
NAMED_OTHERWISE = {"astype": "some Explicit", "static_slice": "some Explicit",
                   "vmap": "all Explicit"}
CASES.update({
    "astype": lambda jax, jnp, pre: pre.astype(jnp.int32),
    "static_slice": lambda jax, jnp, pre: pre[1:],
    "vmap": lambda jax, jnp, pre: jax.vmap(jnp.sin)(pre),
})


def _describe(jax, x):
    if isinstance(x, (tuple, list)):
        return [_describe(jax, e) for e in x]
    return (repr(x.sharding), bool(x.committed), str(jax.typeof(x)))


def _outcome(jax, case, mesh_name):
    jnp = jax.numpy
    shape, names, types = MESHES[mesh_name]
    axis_types = tuple(getattr(jax.sharding.AxisType, t) for t in types)
    devices = jax.devices()[:int(np.prod(shape))]
    mesh = jax.make_mesh(shape, names, axis_types=axis_types, devices=devices)
    pre = jnp.arange(3.0)
    with jax.set_mesh(mesh):
        try:
            value = case(jax, jnp, pre)
            out = _describe(jax, value)
            np_value = [np.asarray(v) for v in value] if isinstance(value, tuple) else (
                None if "key" in str(jax.typeof(value)) else np.asarray(value))
        except Exception as e:  # noqa: BLE001 - the class and text are compared
            return (type(e).__name__, str(e)), None
    return out, np_value


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_placement_matches_jax(real_jax, name, mesh_name):
    ours, our_value = _outcome(meshsim, CASES[name], mesh_name)
    theirs, their_value = _outcome(real_jax, CASES[name], mesh_name)
    if their_value is not None:
        for a, b in zip(np.atleast_1d(np.asarray(our_value, dtype=object)),
                        np.atleast_1d(np.asarray(their_value, dtype=object))):
            np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                       rtol=1e-6)
    types = mesh_name.split("-")[1]
    differs = {"some Explicit": "E" in types, "all Explicit": set(types) == {"E"}}
    if name in NAMED_OTHERWISE and differs[NAMED_OTHERWISE[name]]:
        assert ours != theirs, "now named as JAX names it: drop it from NAMED_OTHERWISE"
        assert ours[0].replace("spec=P(None,)", "spec=P()") == theirs[0]
        return
    assert ours == theirs


def test_arrays_made_under_the_mesh_stay_committed_after_it(real_jax):
    for jax in (meshsim, real_jax):
        mesh = jax.make_mesh((4, 2), ("x", "y"))
        with jax.set_mesh(mesh):
            made = jax.numpy.zeros((2, 2))
        later = made * 2  # computed outside the mesh: follows its committed operand
        assert later.committed and later.sharding.mesh == mesh


@pytest.mark.parametrize("types", [("Explicit",), ("Auto",)])
def test_legacy_mesh_context_places_nothing(real_jax, types):
    outs = []
    for jax in (meshsim, real_jax):
        mesh = jax.make_mesh((8,), ("x",), axis_types=(getattr(jax.sharding.AxisType, types[0]),))
        with pytest.warns(DeprecationWarning), mesh:
            outs.append([_describe(jax, v) for v in (jax.numpy.zeros(3), jax.numpy.arange(3.0) + 1,
                                                      jax.numpy.array([1.0]))])
    assert outs[0] == outs[1]


def test_global_set_mesh_places_until_cleared(real_jax):
    outs = []
    for jax in (meshsim, real_jax):
        mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
        jax.set_mesh(mesh)
        try:
            outs.append(_describe(jax, jax.numpy.ones(2)))
        finally:
            jax.set_mesh(None)
    assert outs[0] == outs[1]
