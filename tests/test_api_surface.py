"""The smaller top-level names JAX code uses: `jax.errors` (the tracer
conversion errors, their classes and texts), `ShapeDtypeStruct` and
`eval_shape`, `device_get`, `custom_jvp`, `named_scope`/`named_call`, process
and backend queries, `jax.dtypes` and `jax._src.xla_bridge`. Each is compared
with the installed JAX."""
import functools

import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp


def _both(real_jax):
    return [(meshsim, meshsim.numpy), (real_jax, real_jax.numpy)]


# --- errors ----------------------------------------------------------------------

CONVERSIONS = {
    "bool": lambda x: bool(x > 0),
    "int": lambda x: int(x),
    "float": lambda x: float(x),
    "array": lambda x: np.asarray(x),
    "item": lambda x: x.item(),
    "index": lambda x: [1, 2, 3][x.astype("int32")],
}


def _first_line_and_class(jax, fn):
    with pytest.raises(TypeError) as info:
        jax.jit(fn)(1.0)
    return type(info.value).__name__, str(info.value).splitlines()


@pytest.mark.parametrize("kind", sorted(CONVERSIONS))
def test_tracer_conversion_errors_match_jax(real_jax, kind):
    ours_cls, ours = _first_line_and_class(meshsim, CONVERSIONS[kind])
    jax_cls, theirs = _first_line_and_class(real_jax, CONVERSIONS[kind])
    assert ours_cls == jax_cls
    assert ours[0] == theirs[0]  # the line naming the problem and the traced type
    assert ours[-1] == theirs[-1]  # the pointer to JAX's error reference
    cls = getattr(meshsim.errors, ours_cls)
    assert [c.__name__ for c in cls.__mro__ if c.__module__ != "builtins"][:3] == \
        [c.__name__ for c in getattr(real_jax.errors, jax_cls).__mro__ if c.__module__ != "builtins"][:3]


def test_error_classes_are_catchable_as_jax_documents():
    with pytest.raises(meshsim.errors.ConcretizationTypeError):
        meshsim.jit(lambda x: bool(x))(1.0)
    with pytest.raises(meshsim.errors.TracerIntegerConversionError):
        meshsim.jit(lambda i: [0, 1][i])(1)
    assert issubclass(meshsim.errors.JaxRuntimeError, RuntimeError)
    # concrete arrays still convert
    assert bool(mnp.array(2.0) > 1) and int(mnp.array(3)) == 3 and [0, 1, 2][mnp.array(2)] == 2
    with pytest.raises(TypeError, match="Only integer scalar arrays"):
        [0, 1][mnp.array(1.0)]


# --- ShapeDtypeStruct / eval_shape ------------------------------------------------

def test_shape_dtype_struct_matches_jax(real_jax):
    for jax, jnp in _both(real_jax):
        s = jax.ShapeDtypeStruct((2, 3), jnp.float32)
        assert (s.shape, s.dtype, s.ndim, s.size, s.sharding, s.weak_type) == \
            ((2, 3), np.dtype("float32"), 2, 6, None, False)
        assert s == jax.ShapeDtypeStruct((2, 3), np.float32)
        assert hash(s) == hash(jax.ShapeDtypeStruct((2, 3), np.float32))
    assert repr(meshsim.ShapeDtypeStruct((2, 3), np.float32)) == \
        repr(real_jax.ShapeDtypeStruct((2, 3), np.float32))
    assert meshsim.ShapeDtypeStruct((4,), np.int64).dtype == np.int32  # x64 off, as in JAX
    with pytest.raises(ValueError, match="ShapeDtypeStruct: dtype must be specified."):
        meshsim.ShapeDtypeStruct((2,), None)


@pytest.mark.parametrize("seed", range(4))
def test_eval_shape_matches_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    m, k, n = (int(d) for d in rng.integers(1, 9, 3))

    def f(jnp, x, y, scale):
        return {"prod": x @ y, "total": (x.sum() * scale, 3.0), "ints": jnp.argmax(y, axis=0)}

    got, want = [
        jax.eval_shape(functools.partial(f, jnp), jax.ShapeDtypeStruct((m, k), jnp.float32),
                       np.ones((k, n), np.float32), 2.0)
        for jax, jnp in _both(real_jax)]
    assert repr(got) == repr(want)


def test_eval_shape_allocates_nothing_and_keeps_explicit_shardings(real_jax):
    huge = meshsim.ShapeDtypeStruct((1 << 20, 1 << 20), np.float32)  # 4 TiB if it were real
    out = meshsim.eval_shape(lambda x: (x.T @ x).sum(axis=0), huge)
    assert out == meshsim.ShapeDtypeStruct((1 << 20,), np.float32)
    reprs = []
    for jax, _ in _both(real_jax):
        mesh = jax.make_mesh((4, 2), ("dp", "tp"))
        x = jax.device_put(np.ones((8, 4), np.float32), jax.NamedSharding(mesh, jax.P("dp")))
        reprs.append(repr(jax.eval_shape(lambda x: x * 2, x)))
        s = jax.ShapeDtypeStruct((8, 4), np.float32, sharding=jax.NamedSharding(mesh, jax.P("dp")))
        assert str(jax.make_jaxpr(lambda x: x.sum(axis=1))(s).out_avals[0].str_short()) == "float32[8@dp]"
    assert reprs[0] == reprs[1]


# --- device_get, process/backend queries, xla_bridge --------------------------------

def test_device_get(real_jax):
    mesh = meshsim.make_mesh((4, 2), ("dp", "tp"))
    x = meshsim.device_put(np.arange(16.0, dtype=np.float32).reshape(8, 2),
                           meshsim.NamedSharding(mesh, meshsim.P("dp", "tp")))
    got = meshsim.device_get({"x": x, "n": 1, "s": "text"})
    assert type(got["x"]) is np.ndarray and got["n"] == 1 and got["s"] == "text"
    np.testing.assert_array_equal(got["x"], np.arange(16.0).reshape(8, 2))


def test_process_and_backend_queries(real_jax):
    for jax, _ in _both(real_jax):
        assert (jax.process_index(), jax.process_count(), jax.default_backend()) == (0, 1, "cpu")
    assert meshsim._src.xla_bridge.backends_are_initialized() in (True, False)
    meshsim.devices()
    assert meshsim._src.xla_bridge.backends_are_initialized()
    assert isinstance(meshsim.devices()[0], meshsim.Device)


def test_dtypes_module(real_jax):
    for name in ("canonicalize_dtype", "float0", "finfo", "iinfo", "issubdtype", "result_type"):
        assert hasattr(meshsim.dtypes, name) and hasattr(real_jax.dtypes, name)
    assert meshsim.dtypes.canonicalize_dtype(np.float64) == real_jax.dtypes.canonicalize_dtype(np.float64)
    assert meshsim.dtypes.float0 == real_jax.dtypes.float0


def test_named_scope_and_named_call_change_no_result(real_jax):
    outs = []
    for jax, _ in _both(real_jax):
        with jax.named_scope("block"):
            text = str(jax.make_jaxpr(lambda x: x + 1)(1.0))
        outs.append((text.count("add"), float(jax.named_call(lambda x: x * 3, name="triple")(2.0))))
    assert outs[0] == outs[1] == (1, 6.0)
    with pytest.raises(TypeError, match="named_scope name argument must be a string"):
        with meshsim.named_scope(3):
            pass


# --- custom_jvp ------------------------------------------------------------------

def _custom_jvp_cases(jax):
    jnp = jax.numpy

    @jax.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (xd, yd) = primals, tangents
        # not the true derivative: shows the rule is what differentiation uses
        return f(x, y), jnp.cos(x) * xd * y + 3.0 * jnp.sin(x) * yd

    @jax.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    softplus.defjvps(lambda t, ans, x: 2.0 * t * jax.nn.sigmoid(x))

    @functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
    def apply(fn, x):
        return fn(x)

    @apply.defjvp
    def apply_jvp(fn, primals, tangents):
        return apply(fn, primals[0]), 10.0 * tangents[0]

    xs = jnp.linspace(-1.0, 2.0, 5)
    return [
        f(1.0, 2.0),
        jax.grad(f)(1.0, 2.0), jax.grad(f, argnums=1)(1.0, 2.0),
        jax.jit(jax.grad(lambda x: f(x, 2.0) ** 2))(0.5),
        jax.jvp(f, (1.0, 2.0), (1.0, 0.5))[1],
        jax.grad(lambda x: softplus(x).sum())(xs),
        jax.vjp(softplus, xs)[1](jnp.ones(5))[0],
        jax.grad(lambda x: apply(jnp.sin, x))(1.0),
        jax.grad(lambda x: jax.grad(lambda y: f(y, 2.0))(x))(0.3),  # through the rule's own derivative
    ]


def test_custom_jvp_matches_jax(real_jax):
    got, want = _custom_jvp_cases(meshsim), _custom_jvp_cases(real_jax)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)


def test_custom_jvp_without_rule_raises_as_jax():
    @meshsim.custom_jvp
    def h(x):
        return x

    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function h using defjvp."):
        meshsim.grad(h)(1.0)


# --- jax.Array ---------------------------------------------------------------------

def test_array_is_the_abstract_type_of_every_array_value(real_jax):
    seen = []
    for jax, jnp in _both(real_jax):
        inside = []

        @jax.jit
        def f(x):
            inside.append(isinstance(x, jax.Array))
            return x

        f(jnp.ones(4))
        seen.append((inside[0], isinstance(jnp.ones(3), jax.Array), isinstance(np.ones(3), jax.Array),
                     isinstance(jax.random.key(0), jax.Array), isinstance(1.0, jax.Array),
                     jnp.ones((2, 3)).nbytes, jnp.ones(3, jnp.int32).itemsize))
    assert seen[0] == seen[1] == (True, True, False, True, False, 24, 4)
