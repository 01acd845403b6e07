"""`vmap(..., spmd_axis_name=...)`: the batch split over mesh axes, against JAX 0.10.2 (8 CPU
devices). Sharding constraints, nested jits with out_shardings and shard_maps under such a vmap
get the spmd axes at the batch dimension (values, result shardings, printed programs); inside a
shard_map body the examples do not vary over the spmd axes and the results do; JAX's errors for
specs naming an spmd axis and for spmd axes that disagree with Explicit types."""
import zlib

import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _both(libs, case):
    """case(jax) run under meshsim and JAX: (ours, theirs), or the raised (type, text) of each."""
    results = []
    for lib in libs:
        try:
            results.append(case(lib))
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            results.append((type(e).__name__, str(e)))
    return results


def _data(shape, name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return rng.uniform(-2, 2, size=shape).astype(np.float32)


def _auto_mesh(jax):
    return jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def _program_text(jax, f, *args):
    """make_jaxpr's text with JAX's line breaking (which depends on its printer's width) undone."""
    text = " ".join(str(jax.make_jaxpr(f)(*args)).split())
    return text.replace("[ ", "[").replace(" ]", "]")


def _summary(jax, out):
    return np.asarray(out), str(out.sharding.spec), str(jax.typeof(out))


def _assert_same(ours, theirs):
    assert type(ours) is type(theirs)
    if isinstance(ours, tuple) and ours and isinstance(ours[0], np.ndarray):
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-6)
        assert ours[1:] == theirs[1:]
    else:
        assert ours == theirs


# --- constraints and nested jits under a vmap ----------------------------------------------

CONSTRAINED = {
    # name: (per-example constraint spec, spmd_axis_name)
    "spmd_x_constraint_y": (("y",), "x"),
    "spmd_tuple_x": (("y",), ("x",)),
    "spmd_y_constraint_x": (("x",), "y"),
    "spmd_x_constraint_none": ((None,), "x"),
    "spmd_xy_replicated": ((), ("x", "y")),
    "no_spmd_constraint_y": (("y",), None),
    "spmd_names_constraint_axis": (("y",), "y"),
    "spmd_xy_names_x": (("x",), ("x", "y")),
}


@pytest.mark.parametrize("name", sorted(CONSTRAINED))
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_sharding_constraint_under_vmap(libs, name, jitted):
    spec, spmd = CONSTRAINED[name]
    x = _data((8, 8), name)

    def case(jax):
        mesh = _auto_mesh(jax)
        P = jax.sharding.PartitionSpec

        def f(r):
            r = jax.lax.with_sharding_constraint(r, jax.sharding.NamedSharding(mesh, P(*spec)))
            return jax.numpy.sin(r) * 2

        g = jax.vmap(f, spmd_axis_name=spmd)
        return _summary(jax, (jax.jit(g) if jitted else g)(x))

    _assert_same(*_both(libs, case))


@pytest.mark.parametrize("spmd", ["x", ("x",), None])
def test_nested_jit_out_shardings_under_vmap(libs, spmd):
    x = _data((8, 6), f"nested{spmd}")

    def case(jax):
        mesh = _auto_mesh(jax)
        out = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("y"))
        g = jax.vmap(lambda r: jax.jit(lambda q: q * 2 + 1, out_shardings=out)(r), spmd_axis_name=spmd)
        return _summary(jax, jax.jit(g)(x))

    _assert_same(*_both(libs, case))


def test_constraint_jaxpr_under_vmap_names_the_spmd_axis(libs):
    # Our sharding_constraint prints its own params; the spec at the batch dimension is JAX's.
    x = _data((8, 8), "jaxpr")
    mesh = _auto_mesh(meshsim)
    P = meshsim.sharding.PartitionSpec
    f = lambda r: meshsim.lax.with_sharding_constraint(r, meshsim.sharding.NamedSharding(mesh, P("y")))  # noqa: E731
    text = str(meshsim.make_jaxpr(meshsim.vmap(f, spmd_axis_name="x"))(x))
    assert "spec=(('x',), ('y',))" in text and "slice" not in text
    text = str(meshsim.make_jaxpr(meshsim.vmap(f, in_axes=1, out_axes=1, spmd_axis_name="x"))(x))
    assert "spec=(('y',), ('x',))" in text


# --- shard_map under a vmap ---------------------------------------------------------------

SHARD_MAPS = {
    # name: (body, in_specs, out_specs, in_axes)
    "psum_y": (lambda jax: lambda b: jax.lax.psum(b, "y"), ("y",), (), 0),
    "scale": (lambda jax: lambda b: b * 2 + 1, (None, "y"), (None, "y"), 0),
    "axis_index": (lambda jax: lambda b: b + jax.lax.axis_index("y"), ("y",), ("y",), 0),
    "batch_at_1": (lambda jax: lambda b: jax.lax.psum(b, "y"), ("y",), (), 1),
    "ppermute": (lambda jax: lambda b: jax.lax.ppermute(b, "y", [(0, 1), (1, 0)]), ("y",), ("y",), 0),
    "pmax": (lambda jax: lambda b: jax.lax.pmax(b, "y"), ("y",), (), 0),
}


@pytest.mark.parametrize("name", sorted(SHARD_MAPS))
@pytest.mark.parametrize("spmd", ["x", None], ids=["spmd_x", "no_spmd"])
def test_shard_map_under_vmap(libs, name, spmd):
    body, in_spec, out_spec, in_axes = SHARD_MAPS[name]
    x = _data((8, 8, 4), name)

    def case(jax):
        mesh = _auto_mesh(jax)
        P = jax.sharding.PartitionSpec
        sm = jax.shard_map(body(jax), mesh=mesh, in_specs=P(*in_spec), out_specs=P(*out_spec))
        g = jax.vmap(sm, in_axes=in_axes, spmd_axis_name=spmd)
        out = jax.jit(g)(x)
        return (*_summary(jax, out), _program_text(jax, g, x))

    _assert_same(*_both(libs, case))


def test_shard_map_under_vmap_with_an_unbatched_operand(libs):
    x, w = _data((8, 4), "batched"), _data((4,), "unbatched")

    def case(jax):
        mesh = _auto_mesh(jax)
        P = jax.sharding.PartitionSpec
        sm = jax.shard_map(lambda b, c: b * c, mesh=mesh, in_specs=(P("y"), P("y")), out_specs=P("y"))
        g = jax.vmap(sm, in_axes=(0, None), spmd_axis_name="x")
        # (JAX broadcasts the unbatched operand to a batch of 1 inside the body, we to the block's.)
        return (*_summary(jax, jax.jit(g)(x, w)), _program_text(jax, g, x, w).count("pvary[axes=('x',)]"))

    _assert_same(*_both(libs, case))


ERRORS = {
    "constraint_names_spmd": lambda jax, mesh, P: jax.vmap(
        lambda r: jax.lax.with_sharding_constraint(r, jax.sharding.NamedSharding(mesh, P("y"))),
        spmd_axis_name="y"),
    "constraint_names_one_of_two": lambda jax, mesh, P: jax.vmap(
        lambda r: jax.lax.with_sharding_constraint(r, jax.sharding.NamedSharding(mesh, P("y"))),
        spmd_axis_name=("x", "y")),
    "shard_map_in_specs": lambda jax, mesh, P: jax.vmap(
        jax.shard_map(lambda b: b, mesh=mesh, in_specs=P("x"), out_specs=P("x")), spmd_axis_name="x"),
    "shard_map_out_specs": lambda jax, mesh, P: jax.vmap(
        jax.shard_map(lambda b: b, mesh=mesh, in_specs=P(None, "y"), out_specs=P(None, ("y", "x"))),
        spmd_axis_name="x"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_spmd_axis_named_by_a_spec_is_refused(libs, name):
    x = _data((8, 8), name)

    def case(jax):
        mesh = _auto_mesh(jax)
        return jax.jit(ERRORS[name](jax, mesh, jax.sharding.PartitionSpec))(x)

    ours, theirs = _both(libs, case)
    assert ours[0] == theirs[0] == "ValueError"
    assert ours == theirs


# --- Explicit axes ------------------------------------------------------------------------

def _explicit_mesh(jax):
    return jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)


EXPLICIT = {
    # name: (specs of the operands, in_axes, spmd_axis_name)
    "spmd_matches_type": ((("x",),), 0, "x"),
    "spmd_differs_from_type": ((("x",),), 0, "y"),
    "spmd_two_axes_type_one": ((("x",),), 0, ("x", "y")),
    "unsharded_batch": (((),), 0, "x"),
    "inconsistent_types": ((("x",), ("y",)), 0, None),
    "sharded_and_unsharded": ((("x",), ()), 0, None),
    "unmapped_on_the_vmapped_axis": ((("x",), (None, "x")), (0, None), None),
    "unmapped_same_axis": ((("x",), ("x",)), (0, None), None),
    "batch_at_1": (((None, "y"),), 1, "y"),
}


@pytest.mark.parametrize("name", sorted(EXPLICIT))
def test_spmd_axis_name_with_explicit_types(libs, name):
    specs, in_axes, spmd = EXPLICIT[name]
    xs = [_data((8, 4), f"{name}{i}") for i in range(len(specs))]

    def case(jax):
        mesh = _explicit_mesh(jax)
        P = jax.sharding.PartitionSpec
        with jax.set_mesh(mesh):
            args = [jax.device_put(x, P(*s)) for x, s in zip(xs, specs)]
            f = jax.vmap(lambda *a: sum(a) * 2, in_axes=in_axes, spmd_axis_name=spmd)
            eager, jitted = f(*args), jax.jit(f)(*args)
            return (*_summary(jax, eager), str(jax.typeof(jitted)))

    _assert_same(*_both(libs, case))


def test_reshard_under_vmap_keeps_the_batch_axis(libs):
    x = _data((8, 4), "reshard")

    def case(jax):
        mesh = _explicit_mesh(jax)
        P = jax.sharding.PartitionSpec
        with jax.set_mesh(mesh):
            sharded = jax.device_put(x, P("x"))
            f = jax.vmap(lambda u: jax.reshard(u, P("y")))
            return [str(jax.typeof(r)) for r in (f(sharded), jax.jit(f)(sharded), jax.jit(f)(x),
                                                 jax.vmap(lambda u: jax.reshard(u, P("y")),
                                                          spmd_axis_name="x")(sharded))]

    _assert_same(*_both(libs, case))


# --- a vmap with spmd axes inside a shard_map body ---------------------------------------------

def _in_body(jax, inner, seen):
    mesh = _auto_mesh(jax)
    P = jax.sharding.PartitionSpec

    def body(b):
        seen.append(("block", str(jax.typeof(b))))
        out = inner(jax, b, seen)
        seen.append(("out", str(jax.typeof(out))))
        return out

    return jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))


def _examples_and_collectives(jax, b, seen):
    def f(r):
        seen.append(("example", str(jax.typeof(r))))
        s = r * 2 + jax.numpy.ones(2)
        seen.append(("mixed", str(jax.typeof(s))))
        t = jax.lax.psum(r, "y")
        seen.append(("psum", str(jax.typeof(t))))
        return t + s
    return jax.vmap(f, spmd_axis_name="x")(b)


def _unbatched_operand_and_constant(jax, b, seen):
    c = jax.numpy.ones(2)
    out = jax.vmap(lambda r, q: r + q, in_axes=(0, None), spmd_axis_name="x")(b, c)
    seen.append(("broadcast", str(jax.typeof(out))))
    scaled = jax.vmap(lambda q: q * 3, spmd_axis_name="x")(c)
    seen.append(("invariant_mapped", str(jax.typeof(scaled))))
    return out


def _psum_over_the_spmd_axis(jax, b, seen):
    return jax.vmap(lambda r: jax.lax.psum(r, "x"), spmd_axis_name="x")(b)


@pytest.mark.parametrize("inner", [_examples_and_collectives, _unbatched_operand_and_constant,
                                   _psum_over_the_spmd_axis], ids=lambda f: f.__name__.strip("_"))
def test_vmap_with_spmd_axis_inside_shard_map(libs, inner):
    x = _data((8, 4), inner.__name__)

    def case(jax):
        seen = []
        jaxpr = _program_text(jax, _in_body(jax, inner, seen), x)
        out = jax.jit(_in_body(jax, inner, []))(x)
        return np.asarray(out), seen, jaxpr

    ours, theirs = _both(libs, case)
    if isinstance(theirs[0], str):  # JAX's error, raised while the batch is applied
        assert ours == theirs
        return
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    assert ours[1] == theirs[1]
    # The programs differ in where the casts go (JAX casts operands, we results) and in JAX's
    # batch-of-1 broadcasts; both cast the results to varying over the spmd axis.
    assert "pvary[axes=('x',)]" in ours[2] and "pvary[axes=('x',)]" in theirs[2]
