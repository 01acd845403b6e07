"""Host callbacks against JAX 0.10.2 (8 CPU devices): `jax.debug.print`, `jax.debug.callback` and
`jax.pure_callback` eagerly, inside jit, inside shard_map bodies (one call per device, in device
order) and under grad; the printed lines and the values must be JAX's."""
import contextlib
import io

import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _printed(jax, case):
    """What `case(jax)` prints (callbacks flushed), and its result or error."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result = ("ok", case(jax))
            jax.effects_barrier()
        except Exception as e:  # noqa: BLE001 - the class name is compared
            jax.effects_barrier()
            result = (type(e).__name__, str(e))
    return out.getvalue(), result


def _same(libs, case, ordered=True):
    """Same printed lines (in the same order when `ordered`: JAX runs a jitted shard_map's
    per-device callbacks concurrently, so their order is not fixed there) and results."""
    (ours, r1), (theirs, r2) = (_printed(lib, case) for lib in libs)
    if not ordered:
        ours, theirs = sorted(ours.splitlines()), sorted(theirs.splitlines())
    assert ours == theirs
    assert r1[0] == r2[0]
    if r1[0] == "ok" and r1[1] is not None:
        np.testing.assert_allclose(np.asarray(r1[1]), np.asarray(r2[1]), rtol=1e-6)
    elif r1[0] != "ok":
        assert r1 == r2
    return ours


def _mesh(jax, shape=(4,), names=("i",)):
    return jax.make_mesh(shape, names)


def _put(jax, mesh, value, *spec):
    return jax.device_put(np.asarray(value), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec)))


def test_debug_print_eager_and_jit(libs):
    def case(jax):
        x = jax.numpy.arange(6.0).reshape(2, 3)
        jax.debug.print("eager {} {y}", x.sum(), y=x[0])

        @jax.jit
        def f(x):
            jax.debug.print("in jit {x} and {n}", x=x * 2, n=x.shape[0])
            return x + 1

        return f(x)

    assert "in jit" in _same(libs, case)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_debug_print_inside_shard_map_prints_once_per_device(libs, jitted):
    """Eagerly in device order; under jit JAX runs the devices' callbacks concurrently."""
    def case(jax):
        mesh = _mesh(jax)
        P = jax.sharding.PartitionSpec

        def body(x):
            jax.debug.print("dbg {x} {i}", x=x, i=jax.lax.axis_index("i"))
            return x * 2

        f = jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
        return (jax.jit(f) if jitted else f)(_put(jax, mesh, np.arange(8.0, dtype=np.float32), "i"))

    printed = _same(libs, case, ordered=not jitted)
    lines = printed if jitted else printed.splitlines()
    assert sorted(lines) == [f"dbg [{2 * i}. {2 * i + 1}.] {i}" for i in range(4)]


def test_debug_print_on_a_2d_mesh_inside_jit(libs):
    def case(jax):
        mesh = _mesh(jax, (2, 2), ("a", "b"))
        P = jax.sharding.PartitionSpec

        @jax.jit
        def f(x):
            def body(v):
                s = jax.lax.psum(v.sum(), "b")
                jax.debug.print("a={a} b={b} s={s}", a=jax.lax.axis_index("a"),
                                b=jax.lax.axis_index("b"), s=s)
                return v
            return jax.shard_map(body, mesh=mesh, in_specs=P("a", "b"), out_specs=P("a", "b"))(x)

        return f(_put(jax, mesh, np.arange(16.0, dtype=np.float32).reshape(4, 4), "a", "b"))

    assert len(_same(libs, case, ordered=False)) == 4


def test_debug_callback_receives_numpy_values(libs):
    def case(jax):
        seen = []

        def record(x, scale):
            seen.append((isinstance(x, jax.Array), x.dtype.name, x.tolist(), float(scale)))

        @jax.jit
        def f(x):
            jax.debug.callback(record, x, scale=x.sum())
            return x * 3

        y = f(jax.numpy.arange(3.0))
        jax.effects_barrier()
        jax.debug.callback(record, jax.numpy.ones(2), scale=2.0)
        print(seen)
        return y

    _same(libs, case)


def test_debug_print_under_grad_keeps_running(libs):
    def case(jax):
        def loss(w):
            jax.debug.print("w={w}", w=w)
            return (w ** 2).sum()

        return jax.jit(jax.grad(loss))(jax.numpy.array([1.0, 2.0]))

    assert "w=" in _same(libs, case)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_pure_callback_values(libs, jitted):
    def case(jax):
        def host(x, y):
            return np.sin(x) * y, (x > 1).astype(np.int32)

        def f(x):
            spec = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape, np.int32))
            a, b = jax.pure_callback(host, spec, x, 2.0)
            return a + b

        return (jax.jit(f) if jitted else f)(jax.numpy.linspace(0.0, 3.0, 7))

    _same(libs, case)


def test_pure_callback_inside_shard_map_runs_per_block(libs):
    def case(jax):
        mesh = _mesh(jax)
        P = jax.sharding.PartitionSpec

        def body(x):
            return jax.pure_callback(lambda v: v[::-1].copy(), jax.ShapeDtypeStruct(x.shape, x.dtype), x)

        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
        return f(_put(jax, mesh, np.arange(8.0, dtype=np.float32), "i"))

    _same(libs, case)


def test_pure_callback_is_not_differentiable(libs):
    def case(jax):
        f = lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)  # noqa: E731
        return jax.grad(lambda x: f(x).sum())(jax.numpy.ones(3))

    _same(libs, case)


def _fails(x):
    raise ValueError("the callback's own error")


_FAILING_CALLBACKS = {
    "raises": lambda jax, x: jax.pure_callback(_fails, jax.ShapeDtypeStruct((3,), np.float32), x),
    "wrong shape": lambda jax, x: jax.pure_callback(lambda v: v[:2], jax.ShapeDtypeStruct((3,), np.float32), x),
    "wrong dtype": lambda jax, x: jax.pure_callback(lambda v: v.astype(np.int32),
                                                    jax.ShapeDtypeStruct((3,), np.float32), x),
    "too many results": lambda jax, x: jax.pure_callback(lambda v: (v, v), jax.ShapeDtypeStruct((3,), np.float32), x),
    "float64 result is canonicalized": lambda jax, x: jax.pure_callback(
        lambda v: v.astype(np.float64) * 2, jax.ShapeDtypeStruct((3,), np.float32), x),
    "io_callback raises": lambda jax, x: __import__(jax.__name__ + ".experimental", fromlist=["io_callback"])
    .io_callback(_fails, jax.ShapeDtypeStruct((3,), np.float32), x),
    "debug.callback raises": lambda jax, x: (jax.debug.callback(_fails, x), x + 1)[1],
}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", sorted(_FAILING_CALLBACKS))
def test_a_failing_callback_raises_what_jax_raises(libs, case, jitted):
    """A callback that raises, or returns results of the wrong number, shape or dtype: JAX's
    runtime error with the callback's traceback, whose last line names the fault."""
    x = np.arange(3, dtype=np.float32)
    outcomes = []
    for jax in libs:
        f = _FAILING_CALLBACKS[case]
        f = jax.jit(lambda x, f=f, jax=jax: f(jax, x)) if jitted else (lambda x, f=f, jax=jax: f(jax, x))
        try:
            outcomes.append(("ok", np.asarray(f(x)).tolist()))
            jax.effects_barrier()
        except Exception as e:  # noqa: BLE001 - the class name and text are compared
            jax.effects_barrier()
            text = str(e)
            outcomes.append((type(e).__name__, text.splitlines()[0], text.splitlines()[-1]))
    assert outcomes[0] == outcomes[1]
