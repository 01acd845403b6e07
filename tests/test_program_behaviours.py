"""Behaviours that JAX programs found in the wild rely on (JAX's documentation on placement and
autodiff, the scaling book's sharded matmuls), each checked against the installed JAX."""
import contextlib
import io

import numpy as np
import pytest

import meshsim
from outcomes import outcome


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _both(libs, case):
    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours == theirs
    return ours


def _printed(fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn()
    return out.getvalue()


# --- placement ---------------------------------------------------------------------------------

@pytest.mark.parametrize("device", [0, 2])
@pytest.mark.parametrize("weak", [True, False])
def test_committed_scalar_keeps_its_mesh_when_combined_with_uncommitted_values(libs, device, weak):
    def case(jax):
        full = jax.make_mesh((8,), ("x",))
        m = jax.make_mesh((1,), ("x",), devices=full.devices[device:device + 1])
        a = jax.device_put(1.0 if weak else np.float32(1.0),
                           jax.sharding.NamedSharding(m, jax.P()))
        rs = [a + jax.numpy.float32(3.0), a * jax.numpy.arange(3.0), jax.numpy.arange(2) - a]
        return [(str(r.sharding), r.committed, str(jax.typeof(r)), np.asarray(r).tolist())
                for r in rs]

    _both(libs, case)


def test_device_put_inside_jit_to_other_devices_raises_jax_error(libs):
    def case(jax):
        P, NamedSharding = jax.P, jax.sharding.NamedSharding
        full = jax.make_mesh((8,), ("x",))
        mesh_a = jax.make_mesh((4,), ("x",), devices=full.devices[:4])
        mesh_b = jax.make_mesh((4,), ("x",), devices=full.devices[4:])
        xa = jax.device_put(np.arange(8.0, dtype=np.float32), NamedSharding(mesh_a, P("x")))

        @jax.jit
        def move(x, scale):
            return jax.device_put(x * scale, NamedSharding(mesh_b, P("x")))

        try:
            move(xa, 2.0)
        except ValueError as e:
            text, where = str(e).split(" at ")
            assert where.endswith(".move)"), where
            # uncommitted arguments follow the device_put
            moved = move(jax.numpy.arange(8.0), 2.0)
            return text, str(moved.sharding), np.asarray(moved).tolist()
        return None

    assert _both(libs, case)[1] is not None


def test_compiled_output_shardings_name_the_concrete_mesh(libs):
    def case(jax):
        mesh = jax.make_mesh((4, 2), ("X", "Y"))
        with jax.set_mesh(mesh):
            a = jax.numpy.zeros((8, 16), out_sharding=jax.P("X", "Y"))
            w = jax.numpy.zeros((16, 32), out_sharding=jax.P("Y", None))
            f = jax.jit(lambda a, w: jax.numpy.einsum("bd,df->bf", a, w, out_sharding=jax.P("X", None)))
            c = f.lower(a, w).compile()
            return repr(c.input_shardings), repr(c.output_shardings), str(c(a, w).sharding)

    _both(libs, case)


# --- Python control flow on the values autodiff differentiates ----------------------------------

CONTROL_FLOW = {
    "if": lambda jnp: lambda x: 2 * x ** 3 if x < 3 else jnp.pi * x,
    "while": lambda jnp: lambda x: _doubling(x),
    "int_range": lambda jnp: lambda x: sum(x * i for i in range(int(x))),
    "index": lambda jnp: lambda x: jnp.arange(5.0)[jnp.int32(x)] * x,
    "item": lambda jnp: lambda x: x.item() * x,
    "array_sum": lambda jnp: lambda x: jnp.where(x > 0, x, 0.0).sum() if x.sum() > 2 else x.sum(),
    "float": lambda jnp: lambda x: float(x) * x,
    "numpy": lambda jnp: lambda x: np.asarray(x) * x,
}


def _doubling(x):
    while x < 10.0:
        x = x * 2
    return x


@pytest.mark.parametrize("name", sorted(CONTROL_FLOW))
@pytest.mark.parametrize("x", [1.5, 2.0, 4.0])
def test_grad_and_vjp_of_python_control_flow_on_primal_values(libs, name, x):
    def case(jax):
        f = CONTROL_FLOW[name](jax.numpy)
        arg = jax.numpy.full((3,), x) if name == "array_sum" else x
        g = jax.grad(lambda v: jax.numpy.sum(f(v)))(arg)
        y, pullback = jax.vjp(f, arg)
        return np.asarray(g).tolist(), np.asarray(y).tolist(), \
            [np.asarray(c).tolist() for c in pullback(jax.numpy.ones_like(y))]

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        np.testing.assert_allclose(np.asarray(ours[1][0]), np.asarray(theirs[1][0]), rtol=1e-6)
        assert ours[1][1:] == theirs[1][1:]
    else:
        assert ours[1].split("\n")[0] == theirs[1].split("\n")[0]


def test_hessian_and_jvp_of_python_control_flow(libs):
    def case(jax):
        cubic = lambda x: x ** 3 if x > 0 else x  # noqa: E731
        return [float(jax.hessian(cubic)(2.0)), float(jax.hessian(cubic)(-2.0)),
                [float(v) for v in jax.jvp(cubic, (2.0,), (1.0,))]]

    _both(libs, case)


def test_printing_values_inside_grad_shows_their_primals(libs):
    def case(jax):
        jnp = jax.numpy

        def show(x):
            print(x)
            print(repr(x))
            print(jnp.int32(x[0] if x.ndim else x))
            return (x * x).sum()

        return _printed(lambda: (jax.grad(show)(jnp.arange(3.0)),
                                 jax.grad(lambda x: show(x * 2))(3.0),
                                 jax.jit(jax.grad(show))(3.0),
                                 jax.value_and_grad(show)(jnp.ones((2, 2), jnp.bfloat16)),
                                 jax.grad(jax.grad(show))(3.0)))

    _both(libs, case)


# --- complex tolerances ------------------------------------------------------------------------

def test_isclose_of_complex_values_compares_real_tolerances(libs):
    def case(jax):
        jnp = jax.numpy
        a = jnp.array([1 + 1j, 2 + 0.5j, np.inf + 0j, np.nan + 1j], jnp.complex64)
        return [np.asarray(jnp.isclose(a, a + 1e-7)).tolist(), bool(jnp.allclose(a[:2], a[:2] + 1e-7)),
                np.asarray(jnp.isclose(a, a, equal_nan=True)).tolist(),
                np.asarray(jnp.isclose(a, 1 + 1j)).tolist(),
                np.asarray(jnp.isclose(jnp.array([1 + 1j]), jnp.array([1 + 1.00001j]), rtol=0)).tolist()]

    _both(libs, case)


# --- control flow and sub-program calls over Explicit shardings --------------------------------

def _explicit_cases(jax):
    jnp, lax = jax.numpy, jax.lax

    @jax.custom_vjp
    def doubled(x):
        return x * 2

    doubled.defvjp(lambda x: (x * 2, None), lambda r, g: (g * 2,))

    def layers(ws, x):
        return lax.scan(lambda c, w: (jnp.tanh(c @ w), c.sum()), x, ws)

    return {
        "fori": lambda x, ws: lax.fori_loop(0, 3, lambda i, c: c * 2 + i, x),
        "while": lambda x, ws: lax.while_loop(lambda c: jnp.abs(c).sum() < 500, lambda c: c * 2, x),
        "cond": lambda x, ws: lax.cond(x.sum() > 0, lambda c: c * 2, lambda c: -c, x),
        "switch": lambda x, ws: lax.switch(1, [lambda c: c, lambda c: c + 1, jnp.sin], x),
        "scan_layers": lambda x, ws: layers(ws, x),
        "scan_xs_sharded": lambda x, ws: lax.scan(lambda c, r: (c + r, r * 2), jnp.zeros(4), x),
        "map_sharded": lambda x, ws: lax.map(lambda r: r * 2, x),
        "remat": lambda x, ws: jax.checkpoint(lambda y: jnp.sin(y) @ ws[0])(x),
        "custom_vjp": lambda x, ws: doubled(x),
        "grad_scan": lambda x, ws: jax.grad(lambda w, v: jnp.sum(layers(w, v)[0] ** 2))(ws, x),
        "grad_remat": lambda x, ws: jax.grad(lambda v: jax.checkpoint(lambda y: jnp.sin(y).sum())(v))(x),
        "grad_custom_vjp": lambda x, ws: jax.grad(lambda w, v: (doubled(v) @ w[0]).sum())(ws, x),
    }


@pytest.mark.parametrize("name", sorted(_explicit_cases(meshsim)))
@pytest.mark.parametrize("context", [False, True])
def test_control_flow_over_explicit_shardings_matches_jax(libs, name, context):
    def case(jax):
        mesh = jax.make_mesh((2, 2), ("X", "Y"), devices=jax.devices()[:4])
        x = jax.device_put(np.linspace(-1, 2, 24, dtype=np.float32).reshape(6, 4),
                           jax.sharding.NamedSharding(mesh, jax.P("X", None)))
        ws = jax.device_put(np.stack([np.eye(4, dtype=np.float32) / 2] * 3),
                            jax.sharding.NamedSharding(mesh, jax.P()))
        f = jax.jit(_explicit_cases(jax)[name])
        with (jax.set_mesh(mesh) if context else contextlib.nullcontext()):
            out = f(x, ws)
        leaves = jax.tree_util.tree_leaves(out)
        return [(str(jax.typeof(v)), np.asarray(v)) for v in leaves]

    ours, theirs = (outcome(case, lib) for lib in libs)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] != "ok":
        assert ours == theirs
        return
    assert [t for t, _ in ours[1]] == [t for t, _ in theirs[1]]
    for (_, a), (_, b) in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


# --- mutable array references ------------------------------------------------------------------

def test_ref_writes_drop_weak_type_as_jax_does(libs):
    def case(jax):
        jnp = jax.numpy
        out = []
        r = jax.new_ref(0)
        r[...] += 5
        out.append(repr(r))
        r = jax.new_ref(0)
        jax.lax.fori_loop(0, 3, lambda i, c: r.__setitem__(Ellipsis, r[...] + 1), None)
        out.append(repr(r))
        r = jax.new_ref(0.0)
        jax.jit(lambda: r.__setitem__(Ellipsis, r[...] + 1.0))()
        out.append(repr(r))
        r = jax.new_ref(jnp.zeros(3))
        r[1] = 2.0
        out.append(repr(r))
        return out

    _both(libs, case)


def test_vjp_with_refs_accumulates_cotangents_into_refs(libs):
    def case(jax):
        jnp = jax.numpy
        out = []
        r = jax.new_ref(0.0)
        _, sin_vjp = jax.vjp(jnp.sin, 1.0)
        out += [repr(sin_vjp.with_refs(r)(1.0)), repr(r), type(sin_vjp).__name__]
        _, mul_vjp = jax.vjp(lambda a, b: a * b, 1.0, 2.0)
        out.append(repr(mul_vjp.with_refs(jax.ad.GradValue(), jax.ad.DontWant())(1.0)))
        out.append(repr(mul_vjp(3.0)))
        acc = jax.new_ref(jnp.zeros(3))
        _, v = jax.vjp(lambda x: x * 2, jnp.ones(3))
        out.append(repr(jax.jit(lambda c: v.with_refs(acc)(c))(jnp.ones(3))))
        out.append(repr(acc))

        @jax.jit
        def take(x, i):
            return x[i]

        grad_ref = jax.new_ref(jnp.zeros(10))
        for i in [3, 5, 3]:
            _, take_vjp = jax.vjp(take, jnp.arange(10.0), i)
            take_vjp.with_refs(grad_ref, jax.ad.GradValue())(1.0)
        out.append(repr(grad_ref))
        return out

    _both(libs, case)


def test_vmap_over_ref_arguments_writes_each_examples_part(libs):
    def case(jax):
        jnp = jax.numpy

        def dist(x, y, out_ref):
            out_ref[...] = jnp.sum((x - y) ** 2)

        vecs = jnp.arange(12.0).reshape(3, 4)
        out_ref = jax.new_ref(jnp.zeros((3, 3)))
        jax.vmap(jax.vmap(dist, (0, None, 0)), (None, 0, 0))(vecs, vecs, out_ref)

        def step(x, r):
            r[...] += x * 2
            r[0] = r[0] + 1.0
            return x.sum()

        acc = jax.new_ref(jnp.zeros((4, 2)))
        sums = jax.vmap(step)(jnp.ones((4, 2)), acc)
        jax.jit(jax.vmap(step))(jnp.ones((4, 2)), acc)
        return repr(out_ref), repr(sums), repr(acc)

    _both(libs, case)


def test_vmapped_write_into_a_closed_over_ref_raises_jax_error(libs):
    def case(jax):
        x_ref = jax.new_ref(0.0)

        def write(x):
            x_ref[...] = x

        jax.vmap(write)(jax.numpy.arange(3.0))

    _both(libs, case)


@pytest.mark.parametrize("jitted", [False, True])
def test_shard_map_replication_error_names_the_function_as_jax_does(libs, jitted):
    def case(jax):
        mesh = jax.make_mesh((2,), ("i",), devices=jax.devices()[:2])
        x = jax.device_put(jax.numpy.arange(6.0), jax.sharding.NamedSharding(mesh, jax.P("i")))

        def ident(v):
            return v

        g = jax.shard_map(ident, mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P())
        (jax.jit(g) if jitted else g)(x)

    _both(libs, case)


@pytest.mark.parametrize("axis_type", ["Explicit", "Auto"])
def test_shard_map_result_shardings_name_specs_as_jax_does(libs, axis_type):
    def case(jax):
        P = jax.P
        mesh = jax.make_mesh((4,), ("sp",), axis_types=(getattr(jax.sharding.AxisType, axis_type),))
        x = jax.device_put(np.ones((8, 4), np.float32), jax.sharding.NamedSharding(mesh, P("sp")))
        sm = jax.shard_map(lambda a: (a * 2, jax.lax.psum(a.sum(0), "sp")), mesh=mesh,
                           in_specs=P("sp"), out_specs=(P("sp"), P()))
        runs = [sm(x)] + ([jax.jit(sm)(x)] if axis_type == "Auto" else [])
        return [[repr(o.sharding.spec) for o in r] for r in runs]

    _both(libs, case)


def test_eager_shard_map_replication_error_reports_the_first_output(libs):
    def case(jax):
        P = jax.P
        mesh = jax.make_mesh((4,), ("sp",))
        x = jax.device_put(np.ones((8, 4), np.float32), jax.sharding.NamedSharding(mesh, P("sp")))
        jax.shard_map(lambda a: (a * 2, a.sum(0), a.sum(1)), mesh=mesh, in_specs=P("sp"),
                      out_specs=(P("sp"), P(), P()))(x)

    _both(libs, case)


# --- what libraries (flax) pass through JAX's public API ---------------------------------------

def test_out_sharding_over_the_empty_mesh_asks_for_nothing(libs):
    """flax's Dropout passes `jax.typeof(x).sharding` of an array made outside any mesh."""
    def case(jax):
        x = jax.numpy.ones((3, 4))
        empty = jax.typeof(x).sharding
        draws = [jax.random.bernoulli(jax.random.key(0), 0.5, (3, 4), out_sharding=empty),
                 jax.random.normal(jax.random.key(1), (3, 4), out_sharding=empty),
                 jax.numpy.zeros((2,), out_sharding=empty)]
        return repr(empty), [(str(jax.typeof(d)), np.asarray(d).tolist()) for d in draws]

    _both(libs, case)


def test_reshard_to_the_empty_mesh_raises_jax_error(libs):
    def case(jax):
        x = jax.numpy.ones((3, 4))
        jax.sharding.reshard(x, jax.typeof(x).sharding)

    assert _both(libs, case)[0] == "ValueError"


def test_with_sharding_constraint_takes_shardings_in_any_pytree(libs):
    """The shardings may be given in a registered pytree of the arguments' shape (flax's State
    of PartitionSpecs), not only in lists, tuples and dicts."""
    def case(jax):
        P = jax.P

        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b

        jax.tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
                                           lambda _, c: Pair(*c))
        mesh = jax.make_mesh((2, 4), ("d", "m"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
        with jax.set_mesh(mesh):
            out = jax.jit(lambda p: jax.lax.with_sharding_constraint(p, Pair(P("d"), P(None, "m"))))(
                Pair(np.ones((4, 8), np.float32), np.ones((4, 8), np.float32)))
        return repr(out.a.sharding.spec), repr(out.b.sharding.spec)

    _both(libs, case)


def test_jit_accepts_absent_device_and_backend(libs):
    def case(jax):
        return float(jax.jit(lambda x: x * 2, device=None, backend=None)(1.5))

    _both(libs, case)


def test_layout_and_format_values(libs):
    def case(jax):
        from importlib import import_module
        layout = import_module(jax.__name__ + ".experimental.layout")
        a = layout.Layout((1, 0))
        one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        f = layout.Format(a, one)
        made = [repr(a), repr(layout.Format()), a == layout.Layout((1, 0)),
                a == layout.Layout((0, 1)), f.layout == a, f.sharding == one,
                f == layout.Format(layout.Layout((1, 0)), one)]
        try:
            layout.Format(a)
        except ValueError as e:  # the class is named by its own module
            made.append(str(e).replace(type(a).__module__, "<module>"))
        return made

    _both(libs, case)


@pytest.mark.parametrize("flag", [True, False])
def test_eager_checkpoint_traces_its_function(libs, flag):
    """Called outside any transformation, `jax.checkpoint` still traces: Python control flow
    on a non-static argument raises, and static_argnums makes it work."""
    def case(jax):
        body = lambda x, b: x * 2 if b else -x  # noqa: E731
        static = float(jax.checkpoint(body, static_argnums=(1,))(1.5, flag))
        try:
            jax.checkpoint(body)(1.5, flag)
        except Exception as e:  # noqa: BLE001 - the class is compared (JAX's text names its frame)
            return static, type(e).__name__
        return static, None

    assert _both(libs, case)[1][1] == "TracerBoolConversionError"


def test_shaped_array_takes_the_sharding_typeof_shows(libs):
    """flax's scan builds types with `core.ShapedArray(shape, dtype, sharding=x.aval.sharding)`."""
    def case(jax):
        P = jax.P
        mesh = jax.make_mesh((2, 4), ("a", "b"))
        x = jax.device_put(np.ones((4, 8), np.float32), jax.sharding.NamedSharding(mesh, P("a", "b")))
        plain = jax.numpy.ones((2, 3))
        made = [jax.core.ShapedArray((2, 3), np.float32, sharding=plain.aval.sharding),
                jax.core.ShapedArray((2,), np.float32, True)]
        with jax.set_mesh(mesh):
            made.append(jax.core.ShapedArray((4, 8), np.float32, sharding=x.aval.sharding))
        return [str(a) for a in made], made[0] == plain.aval, made[2] == x.aval

    _both(libs, case)


def test_key_arrays_are_numpy_ndarrays_as_jax_arrays_are(libs):
    def case(jax):
        key = jax.random.key(0)
        return (jax.numpy.ndarray is jax.Array, isinstance(key, jax.numpy.ndarray),
                isinstance(jax.numpy.ones(2), jax.numpy.ndarray), isinstance(1.0, jax.numpy.ndarray))

    _both(libs, case)


def test_array_wrappers_promote_by_the_array_they_hold(libs):
    """An object with `__jax_array__` (flax's Variable) combines with traced arrays by the type
    of the array it holds."""
    def case(jax):
        class Wrapped:
            def __init__(self, value):
                self.value = value

            def __jax_array__(self):
                return self.value

        def f(x, w):
            return x + Wrapped(w), x * Wrapped(w.astype(jax.numpy.float16))

        outs = jax.jit(f)(jax.numpy.ones(3, jax.numpy.float16), jax.numpy.arange(3.0))
        return [(str(o.dtype), np.asarray(o).tolist()) for o in outs]

    assert _both(libs, case)[0] == "ok"
