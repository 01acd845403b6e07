"""Nested jits as JAX 0.10.2 has them: a jitted function called while another is traced (a
user's jax.jit, or a jax.numpy function JAX implements under jit, such as _where) is one `jit`
equation holding its program, printed as JAX prints it (name first, the program's variables
named after the operands and results, programs used twice or longer than 10 equations named
once at the top), and it computes, differentiates, batches and shards as its body in place."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp

RNG = np.random.default_rng(0)


def _arr(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _text_cases(J):
    jnp, lax = J.numpy, J.lax
    X, S = np.ones((4, 8), np.float32), np.float32(2)

    @J.jit
    def inner(a, b):
        return a * b + 1.0

    def long_body(c):
        for _ in range(11):
            c = c * 2.0
        return c

    return {
        "user_jit": (lambda a: inner(a, a).sum(), (X,)),
        "closure_first": (lambda a, s: J.jit(lambda b: b * s)(a), (X, S)),
        "static_argnums": (lambda a: J.jit(lambda b, k: b * k, static_argnums=1)(a, 3), (X,)),
        "pytree_results": (lambda a: J.jit(lambda b: {"u": b, "v": (b, 2 * b)})(a), (X,)),
        "jit_of_jit": (J.jit(lambda a: inner(a, a).sum()), (X,)),
        "inline_true": (lambda a: J.jit(lambda b: b * 2.0, inline=True)(a), (X,)),
        "called_twice": (lambda a: inner(a, a) + inner(a, 2 * a), (X,)),
        "long_body_twice": (lambda a: J.jit(long_body)(a) + J.jit(long_body)(a), (X,)),
        "vmap_of_user_jit": (J.vmap(lambda v: inner(v, v) * 2.0), (X,)),
        "where": (lambda a: jnp.where(a > 0, a, 0.0), (X,)),
        "where_arrays": (lambda a, b: jnp.where(a > b, a, b), (X, X)),
        "where_twice_shared": (lambda a: jnp.where(a > 0, a, 1.0) + jnp.where(a < 0, a, 2.0), (X,)),
        "where_twice_differ": (lambda a: jnp.where(a > 0, a, 1.0) + jnp.where(a < 0, a, a), (X,)),
        "where_in_scan": (lambda v: lax.scan(lambda c, x: (jnp.where(x > c, x, c), c), 0.0, v),
                          (X[0],)),
        "vmap_where": (J.vmap(lambda v, w: jnp.where(v > w, v, w)), (X, X)),
        "cond_long_branch": (lambda a: lax.cond(a.sum() > 0, long_body, lambda c: c, a), (X[0],)),
        "clip_method_by_keyword": (lambda a: a.clip(0.0, 1.0), (X,)),
        "copysign_signbit": (jnp.copysign, (X, -X)),
        "flip": (lambda a: jnp.flip(a, 1), (X,)),
        "argsort_unread_sorted_keys": (lambda a: jnp.argsort(a, axis=1), (X,)),
        "round_tril_cumsum": (lambda a: jnp.cumsum(jnp.tril(jnp.round(a, 1)), axis=0), (X[:, :4],)),
        "heaviside_shared_where": (jnp.heaviside, (X, X)),
        "nn_silu_elu_leaky_relu": (lambda a: J.nn.silu(a) + J.nn.elu(a, 0.5) + J.nn.leaky_relu(a), (X,)),
        "nn_soft_sign_squareplus": (lambda a: J.nn.soft_sign(J.nn.squareplus(a)), (X,)),
        "diff_prepend": (lambda a: jnp.diff(a, 2, axis=0, prepend=0.0), (X,)),
        "append_flat_and_axis": (lambda a: (jnp.append(a, a), jnp.append(a, a[:1], axis=0)), (X,)),
        "ediff1d_ends": (lambda a: jnp.ediff1d(a, to_end=a[0], to_begin=1.0), (X,)),
    }


NAMES = list(_text_cases(meshsim))


@pytest.mark.parametrize("name", NAMES)
def test_jaxpr_text_matches_jax(real_jax, name):
    f, args = _text_cases(real_jax)[name]
    g, _ = _text_cases(meshsim)[name]
    assert str(meshsim.make_jaxpr(g)(*args)) == str(real_jax.make_jaxpr(f)(*args))


def _program(J):
    jnp = J.numpy

    @J.jit
    def layer(w, x):
        return jnp.where(x @ w > 0, x @ w, 0.01 * (x @ w))

    def loss(w, x):
        h = layer(w, x)
        return (J.jit(lambda h: jnp.tanh(h) * h)(h) ** 2).mean()
    return loss


@pytest.mark.parametrize("seed", range(3))
def test_values_grad_vmap_against_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    n, k, m = (int(v) for v in rng.integers(2, 9, size=3))
    w = rng.standard_normal((k, m)).astype(np.float32)
    x = rng.standard_normal((n, k)).astype(np.float32)
    ours, theirs = _program(meshsim), _program(real_jax)
    for transform in (lambda f: f, meshsim.jit, meshsim.grad):
        got = transform(ours)(w, x)
        want = (real_jax.grad(theirs) if transform is meshsim.grad else
                real_jax.jit(theirs) if transform is meshsim.jit else theirs)(w, x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)
    got = meshsim.jit(meshsim.vmap(meshsim.grad(ours), in_axes=(None, 0)))(w, x[:, None])
    want = real_jax.jit(real_jax.vmap(real_jax.grad(theirs), in_axes=(None, 0)))(w, x[:, None])
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)


def test_grad_of_grad_and_jit_of_jit_values(real_jax):
    x = _arr((5,))
    for J in (meshsim, real_jax):
        f = J.jit(lambda a: J.jit(lambda b: J.numpy.sin(b) * b)(a).sum())
        g = J.grad(lambda a: J.grad(f)(a).sum())
        if J is meshsim:
            got = (f(x), g(x))
        else:
            want = (f(x), g(x))
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("axis_type", ["Explicit", "Auto"])
def test_shardings_through_nested_jit(real_jax, axis_type):
    x = _arr((8, 4))
    results = []
    for J in (meshsim, real_jax):
        kind = getattr(J.sharding.AxisType, axis_type)
        mesh = J.make_mesh((4, 2), ("dp", "tp"), axis_types=(kind, kind))
        P, NS = J.sharding.PartitionSpec, J.sharding.NamedSharding
        xs = J.device_put(x, NS(mesh, P("dp", "tp")))

        @J.jit
        def step(a):
            b = J.jit(lambda c: J.numpy.where(c > 0, c, 0.0) * 2.0)(a)
            return b, b.sum(axis=0)
        b, s = step(xs)
        results.append((np.asarray(b), np.asarray(s), str(b.sharding.spec), str(s.sharding.spec),
                        str(J.typeof(b)), str(J.typeof(s))))
    ours, theirs = results
    np.testing.assert_allclose(ours[0], theirs[0])
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    assert ours[2:] == theirs[2:]


def test_closure_over_outer_tracer_and_static_values(real_jax):
    x, s = _arr((3, 4)), np.float32(1.5)
    for J in (meshsim, real_jax):
        def f(a, t):
            return J.jit(lambda b, k: b * t + k, static_argnums=1)(a, 2)
        val = J.jit(f)(x, s), J.grad(lambda a, t: f(a, t).sum(), argnums=1)(x, s)
        if J is meshsim:
            got = val
        else:
            want = val
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_eager_where_is_unchanged():
    x = _arr((4, 3))
    np.testing.assert_array_equal(np.asarray(mnp.where(x > 0, x, 0.0)), np.where(x > 0, x, 0.0))
    with pytest.raises(TypeError, match="where requires ndarray or scalar arguments"):
        mnp.where([True], x, 0.0)


_MESH_CONTEXTS = ["set_mesh", "with_mesh", "abstract_mesh", "set_mesh_then_other_abstract_mesh"]


def _jaxpr_under_context(J, context, shape, names, types, where, x):
    import contextlib
    import warnings
    mesh = J.make_mesh(shape, names, axis_types=tuple(getattr(J.sharding.AxisType, t) for t in types))
    other = J.make_mesh((len(J.devices()),), ("other",))
    f = {"plain": lambda a: J.jit(lambda b: J.numpy.sin(b) * 2.0)(a),
         "closure": lambda a: J.jit(lambda b: b * a[0])(a),
         "vmap": J.vmap(lambda a: J.jit(lambda b: b * 2.0)(a)),
         "jit_of_jit": J.jit(lambda a: J.jit(lambda b: b + 1.0)(a)),
         "shard_map": J.shard_map(lambda a: J.jit(lambda b: b * 2.0)(a), mesh=mesh,
                                  in_specs=J.sharding.PartitionSpec(),
                                  out_specs=J.sharding.PartitionSpec())}[where]
    with contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore", DeprecationWarning)  # JAX's note on `with mesh:`
        if context == "set_mesh":
            stack.enter_context(J.set_mesh(mesh))
        elif context == "with_mesh":
            stack.enter_context(mesh)
        elif context == "abstract_mesh":
            stack.enter_context(J.sharding.use_abstract_mesh(mesh.abstract_mesh))
        else:
            stack.enter_context(J.set_mesh(other))
            stack.enter_context(J.sharding.use_abstract_mesh(mesh.abstract_mesh))
        return str(J.make_jaxpr(f)(x))


@pytest.mark.parametrize("context", _MESH_CONTEXTS)
@pytest.mark.parametrize("where", ["plain", "closure", "vmap", "jit_of_jit", "shard_map"])
def test_context_mesh_recorded_on_jit_equations_as_jax_records_it(real_jax, context, where):
    """JAX's jit equation holds the context mesh (`ctx_mesh`, printed when there is one): set_mesh's
    mesh, also inside a shard_map of it; else an abstract mesh with an Explicit axis; nothing
    for a `with mesh:` block."""
    if where == "shard_map" and context != "set_mesh":
        pytest.skip("shard_map without a mesh argument needs set_mesh's concrete mesh")
    shape = [(8,), (4, 2), (2, 4), (2, 2, 2)][RNG.integers(4)]
    names = ("a", "b", "c")[:len(shape)]
    types = tuple(RNG.choice(["Explicit", "Auto"]) for _ in shape)
    x = _arr((3, 8) if where == "vmap" else (8,))
    ours = _jaxpr_under_context(meshsim, context, shape, names, types, where, x)
    theirs = _jaxpr_under_context(real_jax, context, shape, names, types, where, x)
    assert ours == theirs


def _trace_counts(J, steps, x):
    """How many times each step of a program runs the Python body of a function JAX traces
    (once per argument type for a function and its jit, whatever stages the trace)."""
    traced = []

    def body(a, *static):
        traced.append(1)
        return a * 2.0 + len(static)

    g = J.jit(body)
    sds = J.ShapeDtypeStruct(x.shape, x.dtype)
    actions = {
        "call": lambda: g(x),
        "make_jaxpr_of_jit": lambda: J.make_jaxpr(g)(x),
        "make_jaxpr_of_body": lambda: J.make_jaxpr(body)(x),
        "make_jaxpr_of_caller": lambda: J.make_jaxpr(lambda a: g(a) + 1.0)(x),
        "trace": lambda: g.trace(x),
        "trace_struct": lambda: g.trace(sds),
        "lower": lambda: g.lower(x),
        "new_jit_call": lambda: J.jit(body)(x),
        "grad": lambda: J.grad(lambda a: g(a).sum())(x),
        "vmap": lambda: J.vmap(g)(np.stack([x, x])),
        "jit_of_caller": lambda: J.jit(lambda a: g(a) * 3.0)(x),
        "call_other_shape": lambda: g(x[:1]),
        "make_jaxpr_other_shape": lambda: J.make_jaxpr(g)(x[:1]),
        "static_call": lambda: J.jit(body, static_argnums=1)(x, 3),
    }
    counts = []
    for step in steps:
        before = len(traced)
        actions[step]()
        counts.append(len(traced) - before)
    return counts


_TRACE_STEPS = ["call", "make_jaxpr_of_jit", "make_jaxpr_of_body", "make_jaxpr_of_caller", "trace",
                "trace_struct", "lower", "new_jit_call", "grad", "vmap", "jit_of_caller",
                "call_other_shape", "make_jaxpr_other_shape", "static_call"]


@pytest.mark.parametrize("seed", range(4))
def test_a_function_is_traced_once_per_type_as_in_jax(real_jax, seed):
    """A print in the body shows how often JAX traces: calls, make_jaxpr (of the jit, the
    plain function or a caller), trace/lower, grad and vmap share one trace per type."""
    rng = np.random.default_rng(seed)
    steps = list(rng.choice(_TRACE_STEPS, size=8))
    x = _arr((int(rng.integers(2, 6)),))
    assert _trace_counts(meshsim, steps, x) == _trace_counts(real_jax, steps, x), steps


@pytest.mark.parametrize("seed", range(3))
def test_jit_run_inside_compile_time_eval_gives_the_eager_bits(real_jax, seed):
    # A jitted function run at once inside ensure_compile_time_eval while another function
    # is traced runs compiled, as an eager call does (XLA contracts a*b+c there): flax's
    # lazy_init computes its parameters this way and must equal init's.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 400))
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))

    def inside_and_eager(lib):
        fma = lib.jit(lambda a, b, c: a * b + c)
        found = {}

        def traced(x):
            with lib.ensure_compile_time_eval():
                found["value"] = np.asarray(fma(a, b, c))
            return x
        lib.make_jaxpr(traced)(1.0)
        return found["value"], np.asarray(fma(a, b, c))

    inside, eager = inside_and_eager(meshsim)
    jax_inside, _ = inside_and_eager(real_jax)
    np.testing.assert_array_equal(inside.view(np.uint32), eager.view(np.uint32))
    np.testing.assert_array_equal(inside.view(np.uint32), jax_inside.view(np.uint32))
