"""An un-jitted shard_map body sees concrete values, as under JAX 0.10.2 (8 CPU devices):
`print`/`repr`/f-strings of a value show each device's block under "On cpu:N at mesh
coordinates ...", `jax.debug.print` runs at once in program order, values the same on every
device convert to Python values, and a failing callback names the device it ran for."""
import contextlib
import io

import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _run(jax, case):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result = ("ok", np.asarray(case(jax)))
        except Exception as e:  # noqa: BLE001 - the class name is compared
            result = (type(e).__name__, str(e).splitlines()[0])
        jax.effects_barrier()
    return out.getvalue(), result


def _same(libs, case):
    (ours, r1), (theirs, r2) = (_run(lib, case) for lib in libs)
    assert ours == theirs
    assert r1[0] == r2[0]
    if r1[0] == "ok":
        np.testing.assert_allclose(r1[1], r2[1], rtol=1e-6)
    else:
        assert r1 == r2
    return ours


def _sharded(jax, shape, names, value, spec):
    mesh = jax.make_mesh(shape, names)
    P = jax.sharding.PartitionSpec
    return mesh, jax.device_put(np.asarray(value), jax.sharding.NamedSharding(mesh, P(*spec)))


MESHES = [((4,), ("i",), (8,), ("i",)), ((2, 2), ("a", "b"), (4, 6), ("a", "b")),
          ((2, 4), ("a", "b"), (8, 3), (("a", "b"),)), ((2, 2, 2), ("x", "y", "z"), (2, 4), ("z",))]


@pytest.mark.parametrize("mesh_shape,names,shape,spec", MESHES)
def test_print_shows_each_devices_block(libs, mesh_shape, names, shape, spec):
    rng = np.random.default_rng(len(shape))
    value = rng.integers(-5, 5, size=shape).astype(np.float32)

    def case(jax):
        mesh, x = _sharded(jax, mesh_shape, names, value, spec)
        P = jax.sharding.PartitionSpec

        def body(x):
            print(x)
            y = jax.numpy.maximum(x, 0) * 2 + 0.5
            print(repr(y), f"{y}" == str(y))
            s = jax.lax.psum(x.sum(), names[0])
            print(s)
            print(jax.lax.axis_index(names[-1]) * 10)
            print(x > 0)
            return y
        return jax.shard_map(body, mesh=mesh, in_specs=P(*spec), out_specs=P(*spec))(x)

    printed = _same(libs, case)
    assert printed.count("On cpu:") == 5 * int(np.prod(mesh_shape))


def test_debug_print_runs_in_program_order(libs):
    def case(jax):
        mesh, x = _sharded(jax, (4,), ("i",), np.arange(8.0, dtype=np.float32), ("i",))
        P = jax.sharding.PartitionSpec

        def body(x):
            print("before")
            jax.debug.print("block {x} sum {s}", x=x, s=x.sum())
            print("between")
            jax.debug.callback(lambda v: print("callback", np.asarray(v).tolist()), x * 3)
            print("after")
            return x
        return jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(x)

    assert _same(libs, case).splitlines()[:6] == [
        "before", "block [0. 1.] sum 1.0", "block [2. 3.] sum 5.0", "block [4. 5.] sum 9.0",
        "block [6. 7.] sum 13.0", "between"]


def test_invariant_values_are_concrete_and_varying_ones_are_not(libs):
    def case(jax):
        mesh, x = _sharded(jax, (2, 2), ("a", "b"), np.arange(8.0, dtype=np.float32).reshape(2, 4),
                           ("a", "b"))
        P = jax.sharding.PartitionSpec

        def body(x):
            total = jax.lax.psum(x.sum(), ("a", "b"))
            print(jax.typeof(total), int(total), bool(total > 20), total.item())
            if total > 20:
                print("big")
            try:
                float(total)  # JAX's float() of it still raises
            except jax.errors.ConcretizationTypeError:
                print("float raised")
            bool(x.sum() > 3)  # varies over the mesh: JAX's TracerBoolConversionError
            return x
        return jax.shard_map(body, mesh=mesh, in_specs=P("a", "b"), out_specs=P("a", "b"))(x)

    printed = _same(libs, case)
    assert printed.splitlines() == ["float32[] 28 True 28.0", "big", "float raised"]


def test_results_and_jit_inside_the_body(libs):
    def case(jax):
        mesh, x = _sharded(jax, (4,), ("i",), np.arange(16.0, dtype=np.float32).reshape(8, 2), ("i",))
        P = jax.sharding.PartitionSpec

        def body(x):
            y = jax.jit(lambda v: v @ v.T)(x)
            print(y)
            z = jax.vmap(jax.numpy.sum)(y)
            print(z)
            return jax.lax.psum(z, "i")
        return jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P())(x)

    _same(libs, case)


def test_a_jitted_shard_map_still_traces(libs):
    """Under jit the body is traced: printing shows a tracer, not blocks."""
    def case(jax):
        mesh, x = _sharded(jax, (4,), ("i",), np.arange(8.0, dtype=np.float32), ("i",))
        P = jax.sharding.PartitionSpec
        seen = []

        def body(x):
            seen.append("On cpu:" in str(x))
            return x * x
        f = jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
        jax.jit(f)(x)
        out = f(x)
        assert seen == [False, True]
        return out

    _same(libs, case)


def test_a_failing_callback_names_its_device():
    jax = meshsim
    mesh, x = _sharded(jax, (4,), ("i",), np.arange(8.0, dtype=np.float32), ("i",))
    P = jax.sharding.PartitionSpec

    def check(v):
        if np.asarray(v)[0] >= 4:
            raise ValueError(f"bad block {np.asarray(v)}")

    def eager_body(x):
        jax.debug.callback(check, x)
        return x

    with pytest.raises(ValueError, match="bad block") as info:
        jax.shard_map(eager_body, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(x)
    assert "on cpu:2 at mesh coordinates (i,) = (2,)" in "".join(info.value.__notes__)

    def pure_body(x):
        return jax.pure_callback(lambda v: check(v) or np.asarray(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    for f in (jax.shard_map(pure_body, mesh=mesh, in_specs=P("i"), out_specs=P("i")),
              jax.jit(jax.shard_map(pure_body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))):
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match=r"on cpu:2 at mesh coordinates \(2,\): Traceback (?s:.*)ValueError: bad block"):
            np.asarray(f(x))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("jitted", [False, True])
def test_out_spec_longer_than_the_result_names_its_shape(libs, seed, jitted):
    """Un-jitted, the rank error shows the per-device result's type without the axes it varies
    over (JAX checks concrete blocks); under jit it shows the traced type with them."""
    rng = np.random.default_rng(seed)
    size = int(rng.choice([2, 4, 8]))
    rank = int(rng.integers(0, 3))
    dtype = rng.choice([np.float32, np.int32, np.bool_])
    value = (rng.integers(0, 3, size=(size * 2,) + (3,) * rank)).astype(dtype)
    extra = int(rng.integers(1, 3))

    def case(jax):
        mesh, x = _sharded(jax, (size,), ("i",), value, ("i",))
        P = jax.sharding.PartitionSpec
        body = lambda x: x[0]  # noqa: E731 - rank `rank`, varying over 'i'
        spec = P(*(["i"] + [None] * (rank + extra - 1)))
        f = jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=spec)
        try:
            (jax.jit(f) if jitted else f)(x)
        except ValueError as e:
            return np.array(str(e))
        return np.array("no error")

    (_, ours), (_, theirs) = (_run(lib, case) for lib in libs)
    assert ours == theirs
    assert "which has rank" in str(ours[1])
