"""Behaviours JAX's parallelism documentation relies on, with the installed JAX as the oracle:
printed Array reprs, libm-exact sin/cos, and with_sharding_constraint on Explicit meshes without a
context mesh."""
import numpy as np
import pytest

import meshsim
from outcomes import outcome


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


REPR_VALUES = {
    "wide_floats": lambda jnp: jnp.asarray(np.linspace(-3, 3, 16, dtype=np.float32).reshape(4, 4)) * 1.1,
    "long_ints": lambda jnp: jnp.arange(40),
    "empty": lambda jnp: jnp.zeros((2, 0)),
    "empty_1d": lambda jnp: jnp.arange(0),
    "scalar_weak": lambda jnp: jnp.asarray(1.5) * 2,
    "large_floats": lambda jnp: jnp.arange(12.0).reshape(3, 4) + 1e6,
    "bool": lambda jnp: jnp.arange(5) > 2,
    "bfloat16": lambda jnp: jnp.ones(3, jnp.bfloat16) / 3,
}


@pytest.mark.parametrize("name", sorted(REPR_VALUES))
def test_array_repr_matches_jax(libs, name):
    ours, theirs = (repr(REPR_VALUES[name](lib.numpy)) for lib in libs)
    assert ours == theirs


def test_array_repr_honours_numpy_linewidth(libs):
    def case(jax):
        with np.printoptions(linewidth=40):
            return repr(jax.numpy.asarray(np.arange(24, dtype=np.float32).reshape(4, 6) / 7))

    ours, theirs = (case(lib) for lib in libs)
    assert ours == theirs


@pytest.mark.parametrize("fn", ["sin", "cos"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sin_cos_bitwise_equal_to_jax(libs, fn, dtype):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-1e4, 1e4, 4000), rng.uniform(-4, 4, 4000),
                        np.arange(32), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]]).astype(dtype)
    ours, theirs = (np.asarray(getattr(lib.numpy, fn)(x)) for lib in libs)
    np.testing.assert_array_equal(ours.view(np.uint16 if dtype == np.float16 else np.uint32),
                                  theirs.view(np.uint16 if dtype == np.float16 else np.uint32))


# with_sharding_constraint inside jit with no context mesh: a NamedSharding on an Explicit mesh
# is an Auto-axes constraint, so it may name no Explicit axis, and typed dims keep their axes.
CONSTRAINTS = {
    "replicated": lambda P: P(),
    "replicated_padded": lambda P: P(None, None),
    "same_explicit": lambda P: P("x", "y"),
    "other_explicit": lambda P: P("y", "x"),
    "one_explicit": lambda P: P(None, "y"),
}


@pytest.mark.parametrize("name", sorted(CONSTRAINTS))
@pytest.mark.parametrize("in_context", [False, True])
def test_constraint_on_explicit_mesh_matches_jax(libs, name, in_context):
    def case(jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((4, 2), ("x", "y"))
        x = jax.device_put(np.arange(64, dtype=np.float32).reshape(8, 8),
                           jax.sharding.NamedSharding(mesh, P("x", "y")))
        spec = CONSTRAINTS[name](P)
        f = jax.jit(lambda v: jax.lax.with_sharding_constraint(
            v + 1, jax.sharding.NamedSharding(mesh, spec)))
        if in_context:
            with jax.set_mesh(mesh):
                y = f(x)
        else:
            y = f(x)
        return str(jax.typeof(y)), str(y.sharding.spec), np.asarray(y).tolist()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs


@pytest.mark.parametrize("spec", [(), (None, "y"), ("x", "y")])
def test_constraint_on_mixed_mesh_keeps_explicit_dims(libs, spec):
    def case(jax):
        P, AxisType = jax.sharding.PartitionSpec, jax.sharding.AxisType
        mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
        x = jax.device_put(np.arange(64, dtype=np.float32).reshape(8, 8),
                           jax.sharding.NamedSharding(mesh, P("x", None)))
        y = jax.jit(lambda v: jax.lax.with_sharding_constraint(
            v * 2, jax.sharding.NamedSharding(mesh, P(*spec))))(x)
        return str(jax.typeof(y)), np.asarray(y).tolist()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs


def test_eager_constraint_lays_out_as_asked(libs):
    def case(jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((4, 2), ("x", "y"))
        x = jax.device_put(np.arange(16, dtype=np.float32).reshape(4, 4),
                           jax.sharding.NamedSharding(mesh, P("x", "y")))
        y = jax.lax.with_sharding_constraint(x, jax.sharding.NamedSharding(mesh, P()))
        return str(jax.typeof(y)), np.asarray(y).tolist()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs


GLOBAL_SHAPES = {"none": None, "matching": {"a": (16, 2), "b": None}, "wrong": {"a": (16,), "b": None}}


@pytest.mark.parametrize("name", sorted(GLOBAL_SHAPES))
def test_make_array_from_process_local_data_takes_pytrees(libs, name):
    def case(jax):
        mesh = jax.make_mesh((8,), ("d",))
        data = {"a": np.arange(32, dtype=np.uint8).reshape(16, 2), "b": np.ones((8, 3), np.float32)}
        with jax.set_mesh(mesh):
            out = jax.make_array_from_process_local_data(jax.sharding.PartitionSpec("d"), data,
                                                         GLOBAL_SHAPES[name])
            return {k: (str(jax.typeof(v)), np.asarray(v).tolist()) for k, v in out.items()}

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs


def test_ref_namespace_matches_jax(libs):
    def case(jax):
        ref = jax.ref.new_ref(jax.numpy.arange(6.0))
        seen = [np.asarray(jax.ref.get(ref)).tolist(), np.asarray(jax.ref.get(ref, slice(1, 3))).tolist()]
        jax.ref.set(ref, 2, 10.0)
        seen.append(np.asarray(jax.ref.swap(ref, None, jax.numpy.ones(6))).tolist())
        jax.ref.addupdate(ref, slice(0, 2), jax.numpy.full(2, 5.0))
        seen.append(np.asarray(jax.ref.freeze(ref)).tolist())
        params = jax.tree.map(jax.ref.new_ref, {"w": jax.numpy.ones(3)})

        @jax.jit
        def step(params):
            values = jax.tree.map(jax.ref.get, params)
            params["w"][...] = values["w"] * 3

        step(params)
        seen.append(np.asarray(params["w"][...]).tolist())
        return seen

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs and ours[0] == "ok"


@pytest.mark.parametrize("index_dtype", [np.int32, np.uint8])
@pytest.mark.parametrize("mode", ["eager", "jit", "grad"])
def test_gather_with_out_sharding_matches_jax(libs, index_dtype, mode):
    """An embedding lookup with indices sharded over the batch (the training cookbook's)."""
    def case(jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((8,), ("fsdp",))
        table = jax.numpy.asarray(np.random.default_rng(3).normal(size=(64, 4)).astype(np.float32))
        ids = np.random.default_rng(4).integers(0, 64, (16, 3)).astype(index_dtype)
        with jax.set_mesh(mesh):
            ids = jax.device_put(ids, P("fsdp"))
            lookup = lambda t, i: t.at[i].get(out_sharding=P("fsdp", None, None))  # noqa: E731
            if mode == "eager":
                y = lookup(table, ids)
            elif mode == "jit":
                y = jax.jit(lookup)(table, ids)
            else:
                y = jax.jit(jax.grad(lambda t, i: (lookup(t, i) ** 2).sum()))(table, ids)
            return str(jax.typeof(y)), np.round(np.asarray(y), 5).tolist()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs and ours[0] == "ok"


@pytest.mark.parametrize("subscripts,shapes", [
    ("bsd,3dkh->bs3kh", [(2, 3, 4), (3, 4, 5, 2)]),
    ("ab1,1c", [(2, 3, 4), (4, 5)]),
    ("x9,9y->yx", [(3, 2), (2, 4)]),
])
def test_einsum_takes_any_label_character(libs, subscripts, shapes):
    rng = np.random.default_rng(5)
    operands = [rng.normal(size=s).astype(np.float32) for s in shapes]
    ours, theirs = (lib.numpy.einsum(subscripts, *operands) for lib in libs)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_ref_keeps_weak_type_through_writes(libs):
    """An Adam step counter made from a Python int stays weakly typed, so bias corrections
    computed from it keep bfloat16 moments in bfloat16."""
    def case(jax):
        jnp = jax.numpy
        count, mu = jax.ref.new_ref(jnp.array(0)), jax.ref.new_ref(jnp.ones(3, jnp.bfloat16))
        seen = []

        @jax.jit
        def step(count, mu):
            count[...] += 1
            mu_hat = mu[...] / (1 - 0.9 ** count[...])
            seen.append((str(jax.typeof(count[...])), str(jax.typeof(mu_hat))))
            mu[...] = mu_hat

        step(count, mu)
        count[...] = 5
        return seen, str(jax.typeof(count[...])), np.asarray(mu[...], np.float32).tolist()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs and ours[0] == "ok"


ALL_REDUCE_PROGRAMS = {
    "sum_over_sharded_dim": (lambda jax: lambda x: x.sum(0), ("X", "Y")),
    "sum_over_whole_dim": (lambda jax: lambda x: x.sum(1), ("X", None)),
    "elementwise": (lambda jax: lambda x: x * 2 + 1, ("X", "Y")),
    "contraction_with_out_sharding": (
        lambda jax: lambda x: jax.numpy.matmul(x.T, x, out_sharding=jax.P()), ("X", None)),
    "shard_map_psum": (lambda jax: jax.shard_map(lambda b: jax.lax.psum(b, "X"),
                                                 in_specs=jax.P("X", None), out_specs=jax.P()),
                       ("X", None)),
}


@pytest.mark.parametrize("name", sorted(ALL_REDUCE_PROGRAMS))
def test_compiled_text_names_the_all_reduce_as_jax(libs, name):
    def case(jax):
        make, spec = ALL_REDUCE_PROGRAMS[name]
        mesh = jax.make_mesh((4, 2), ("X", "Y"))
        with jax.set_mesh(mesh):
            x = jax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), jax.P(*spec))
            return "all-reduce(" in jax.jit(make(jax)).lower(x).compile().as_text()

    ours, theirs = (case(lib) for lib in libs)
    assert ours == theirs


def test_reshard_under_another_abstract_mesh_inside_jit(libs):
    """Inside jit, `use_abstract_mesh` with another shape over the same devices makes
    PartitionSpecs mean that mesh: the context mesh's devices arranged as it."""
    def case(jax):
        mesh = jax.make_mesh((4, 2), ("X", "Y"))
        seen = []
        with jax.set_mesh(mesh):
            x = jax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), jax.P("X", "Y"))

            @jax.jit
            def f(x):
                flat = jax.sharding.AbstractMesh((8,), ("A",), (jax.sharding.AxisType.Explicit,))
                with jax.sharding.use_abstract_mesh(flat):
                    y = jax.reshard(x, jax.P("A", None))
                    seen.append(str(jax.typeof(y)))
                    return y * 2

            z = f(x)
            return seen, str(jax.typeof(z)), repr(z.sharding), np.asarray(z).tolist()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs and ours[0] == "ok"


MESH_PAIRS = {  # device orders of two meshes, as indices into jax.devices()
    "disjoint": ([0, 1, 2, 3], [4, 5, 6, 7]),
    "permuted": (list(range(8)), [0, 1, 2, 3, 6, 7, 4, 5]),
    "same_devices_other_name": (list(range(8)), list(range(8))),
}


@pytest.mark.parametrize("name", sorted(MESH_PAIRS))
@pytest.mark.parametrize("jitted", [False, True])
def test_arrays_on_meshes_with_other_devices_cannot_meet(libs, name, jitted):
    def case(jax):
        d = jax.devices()
        first, second = MESH_PAIRS[name]
        m1 = jax.sharding.Mesh([d[i] for i in first], "x")
        m2 = jax.sharding.Mesh([d[i] for i in second], "y")
        x = np.arange(64, dtype=np.float32).reshape(8, 8)
        y = jax.device_put(x, jax.sharding.NamedSharding(m1, jax.P("x")))
        z = jax.device_put(x, jax.sharding.NamedSharding(m2, jax.P("y")))
        out = jax.jit(lambda a, b: a * b)(y, z) if jitted else y + z
        return np.asarray(out).tolist(), np.asarray(y + jax.numpy.ones_like(y)).sum().item()

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs


REF_STEPS = {
    # how the jitted step reaches the Refs
    "arguments": lambda jax, step, refs: jax.jit(step)(*refs),
    "pytree_argument": lambda jax, step, refs: jax.jit(lambda d: step(d["count"], d["mu"]))(
        {"count": refs[0], "mu": refs[1]}),
    "closed_over": lambda jax, step, refs: jax.jit(lambda: step(*refs))(),
}


@pytest.mark.parametrize("steps", [2, 3])
@pytest.mark.parametrize("how", sorted(REF_STEPS))
def test_ref_weak_type_survives_repeated_jitted_steps(libs, how, steps):
    """Each jitted call writes its results back into the Refs; the next call must see the Refs'
    own (weak) types again, not the written values', or a bfloat16 moment divided by a bias
    correction becomes float32 and the write raises."""
    def case(jax):
        jnp = jax.numpy
        made = jax.jit(lambda: (jnp.array(0), jnp.ones(4, jnp.bfloat16)))()
        refs = [jax.ref.new_ref(v) for v in made]
        seen = []

        def step(count, mu):
            count[...] += 1
            mu[...] = mu[...] / (1 - 0.9 ** count[...])
            seen.append(str(jax.typeof(count[...])))

        for _ in range(steps):
            REF_STEPS[how](jax, step, refs)
        if how == "closed_over":  # meshsim finds closed-over Refs by tracing twice on a first call
            seen = sorted(set(seen))
        return (seen, str(jax.typeof(refs[0][...])), str(jax.typeof(jax.ref.freeze(refs[0]))),
                np.asarray(refs[1][...], np.float32).tolist())

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs and ours[0] == "ok"


@pytest.mark.parametrize("meshes_kind", ["sub_meshes", "reversed_mesh"])
def test_one_jitted_function_on_several_device_sets_places_each_on_its_own(libs, meshes_kind):
    # A pipeline of stages on disjoint sub-meshes of the same shape: each call of the one jitted
    # stage leaves its result on its input's devices (and on a mesh equal to the input's).
    def run(lib):
        full = lib.make_mesh((8,), ("x",))
        if meshes_kind == "sub_meshes":
            meshes = [lib.make_mesh((2,), ("x",), devices=full.devices[2 * i:2 * i + 2]) for i in range(4)]
        else:
            meshes = [full, lib.make_mesh((8,), ("x",), devices=full.devices[::-1])]
        stage = lib.jit(lambda x: lib.numpy.sin(x) + 1.0)
        x = np.arange(32.0, dtype=np.float32).reshape(8, 4)
        seen = []
        for m in meshes:
            x = stage(lib.device_put(x, lib.sharding.NamedSharding(m, lib.P("x"))))
            seen.append((x.sharding.mesh == m, [d.id for d in x.sharding.mesh.devices.ravel()],
                         sorted((s.device.id, float(s.data[0, 0])) for s in x.addressable_shards)))
        return seen, np.asarray(x)
    (ours, ours_x), (theirs, theirs_x) = (run(lib) for lib in libs)
    assert ours == theirs
    np.testing.assert_allclose(ours_x, theirs_x, rtol=1e-6)
