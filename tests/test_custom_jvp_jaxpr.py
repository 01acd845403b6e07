"""custom_jvp functions as JAX 0.10.2 records them: a custom_jvp_call equation holding the
function's program (call_jaxpr), its consts first, printed with the rule's name (jvp=...) and
symbolic_zeros; differentiated, the rule replaces the call (its primal part recorded in place,
a call of the function itself included), batched, both programs are. Printed text, jaxpr
objects and values against JAX's on random shapes and dtypes."""
import importlib
from functools import partial

import numpy as np
import pytest

import meshsim
from meshsim._src.jax_internals_compat.extend import core as MEXT  # jax.extend.core under meshsim

RNG = np.random.default_rng(1912)
DTYPES = (np.float32, np.float16, np.float64)


def _shape(rng):
    return tuple(int(d) for d in rng.integers(1, 5, rng.integers(0, 3)))


def _array(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _drop_dead_known(text: str) -> str:
    """JAX keeps a known equation nobody reads (`_ = ...`) in a differentiated program, meshsim
    removes it: the text without those lines (the names of the others do not change)."""
    return "\n".join(line for line in str(text).splitlines() if not line.lstrip().startswith("_:"))


def _user_functions(J, kind):
    """A custom_jvp function and its argument count, of several forms."""
    jnp = J.numpy
    if kind == "plain":
        @J.custom_jvp
        def f(x, y):
            return jnp.sin(x) * y

        @f.defjvp
        def f_jvp(primals, tangents):
            x, y = primals
            tx, ty = tangents
            return f(x, y), jnp.cos(x) * tx * y + jnp.sin(x) * ty
        return f, 2
    if kind == "nondiff":
        @partial(J.custom_jvp, nondiff_argnums=(0,))
        def f(n, x):
            return x ** n

        @f.defjvp
        def power_jvp(n, primals, tangents):
            (x,), (t,) = primals, tangents
            return f(n, x), n * x ** (n - 1) * t
        return partial(f, 3), 1
    if kind == "symbolic_zeros":
        @J.custom_jvp
        def f(x, y):
            return x * y

        @partial(f.defjvp, symbolic_zeros=True)
        def product_jvp(primals, tangents):
            x, y = primals
            terms = [t * other for t, other in zip(tangents, (y, x)) if type(t).__name__ != "SymbolicZero"]
            return f(x, y), sum(terms[1:], terms[0]) if terms else jnp.zeros_like(x * y)
        return f, 2
    if kind == "defjvps":
        @J.custom_jvp
        def f(x, y):
            return jnp.exp(x) - y

        f.defjvps(lambda t, ans, x, y: t * jnp.exp(x), lambda t, ans, x, y: -t)
        return f, 2
    raise ValueError(kind)


KINDS = ("plain", "nondiff", "symbolic_zeros", "defjvps")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_make_jaxpr_prints_as_jax(real_jax, kind, seed):
    rng = np.random.default_rng([seed, KINDS.index(kind)])
    shape, dtype = _shape(rng), DTYPES[seed % 3]
    f_jax, n = _user_functions(real_jax, kind)
    f_ms, _ = _user_functions(meshsim, kind)
    args = [_array(rng, shape, dtype) for _ in range(n)]
    want = real_jax.make_jaxpr(f_jax)(*args)
    got = meshsim.make_jaxpr(f_ms)(*args)
    assert str(got) == str(want)
    np.testing.assert_allclose(np.asarray(f_ms(*args), np.float64), np.asarray(f_jax(*args), np.float64),
                               rtol=2e-3 if dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_grad_jvp_vmap_values(real_jax, kind, seed):
    rng = np.random.default_rng([seed, 7, KINDS.index(kind)])
    shape = _shape(rng)
    f_jax, n = _user_functions(real_jax, kind)
    f_ms, _ = _user_functions(meshsim, kind)
    args = [_array(rng, shape, np.float32) for _ in range(n)]
    tangents = [_array(rng, shape, np.float32) for _ in range(n)]
    tol = dict(rtol=1e-5, atol=1e-6)
    argnums = tuple(range(n))

    def check(want, got):
        for w, g in zip(real_jax.tree.leaves(want), meshsim.tree.leaves(got)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), **tol)

    def summed(J, f):
        return lambda *a: (f(*a) ** 2).sum()

    check(real_jax.grad(summed(real_jax, f_jax), argnums)(*args),
          meshsim.grad(summed(meshsim, f_ms), argnums)(*args))
    check(real_jax.jvp(f_jax, args, tangents), meshsim.jvp(f_ms, args, tangents))
    batched = [np.stack([a, a * 2.0]) for a in args]
    check(real_jax.vmap(f_jax)(*batched), meshsim.vmap(f_ms)(*batched))
    # Second order: the rule's own call of the function differentiates by the rule again.
    g2_jax = real_jax.grad(lambda x: real_jax.grad(summed(real_jax, f_jax))(x, *args[1:]).sum())
    g2_ms = meshsim.grad(lambda x: meshsim.grad(summed(meshsim, f_ms))(x, *args[1:]).sum())
    check(g2_jax(args[0]), g2_ms(args[0]))


@pytest.mark.parametrize("kind", ("plain", "nondiff"))
@pytest.mark.parametrize("seed", range(3))
def test_grad_program_as_jax(real_jax, kind, seed):
    # The rule's primal part, its call of the function first, then the transposed tangents.
    rng = np.random.default_rng([seed, 11])
    shape = _shape(rng)
    f_jax, n = _user_functions(real_jax, kind)
    f_ms, _ = _user_functions(meshsim, kind)
    args = [_array(rng, shape, np.float32) for _ in range(n)]
    argnums = tuple(range(n))
    want = real_jax.make_jaxpr(real_jax.grad(lambda *a: f_jax(*a).sum(), argnums))(*args)
    got = meshsim.make_jaxpr(meshsim.grad(lambda *a: f_ms(*a).sum(), argnums))(*args)
    assert _drop_dead_known(got) == _drop_dead_known(want)


def _closing_over(J):
    jnp = J.numpy

    def outer(x, z):
        @J.custom_jvp
        def h(x):
            return jnp.sin(x) * z

        h.defjvp(lambda p, t: (h(p[0]), jnp.cos(p[0]) * t[0] * z))
        return h(x)
    return outer


@pytest.mark.parametrize("seed", range(3))
def test_consts_come_first(real_jax, seed):
    # A function closing over a traced value reads it first (num_consts=1); the rule reading
    # the same value adds no operand.
    rng = np.random.default_rng([seed, 13])
    x, z = (_array(rng, _shape(rng), np.float32) for _ in range(2))
    z = np.broadcast_to(z, np.broadcast_shapes(x.shape, z.shape)).copy()
    x = np.broadcast_to(x, z.shape).copy()
    f_jax, f_ms = _closing_over(real_jax), _closing_over(meshsim)
    assert str(meshsim.make_jaxpr(f_ms)(x, z)) == str(real_jax.make_jaxpr(f_jax)(x, z))
    want = real_jax.make_jaxpr(real_jax.grad(lambda x, z: f_jax(x, z).sum()))(x, z)
    got = meshsim.make_jaxpr(meshsim.grad(lambda x, z: f_ms(x, z).sum()))(x, z)
    assert str(got) == str(want)
    np.testing.assert_allclose(np.asarray(meshsim.grad(lambda x, z: f_ms(x, z).sum())(x, z)),
                               np.asarray(real_jax.grad(lambda x, z: f_jax(x, z).sum())(x, z)), rtol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_relu_forms(real_jax, seed):
    rng = np.random.default_rng([seed, 17])
    x = _array(rng, _shape(rng), DTYPES[seed % 3])
    x.flat[0] = 0.0  # the kink: the rule's derivative there is 0
    for fn in ("relu", "gelu", "silu"):
        f_jax, f_ms = getattr(real_jax.nn, fn), getattr(meshsim.nn, fn)
        assert str(meshsim.make_jaxpr(f_ms)(x)) == str(real_jax.make_jaxpr(f_jax)(x)), fn
    x = x.astype(np.float32)  # (a float16 seed cotangent is converted otherwise than JAX's)
    g_jax = real_jax.grad(lambda x: real_jax.nn.relu(x).sum())
    g_ms = meshsim.grad(lambda x: meshsim.nn.relu(x).sum())
    assert _drop_dead_known(meshsim.make_jaxpr(g_ms)(x)) == _drop_dead_known(real_jax.make_jaxpr(g_jax)(x))
    np.testing.assert_array_equal(np.asarray(g_ms(x)), np.asarray(g_jax(x)))
    batched = np.stack([x, -x])
    want = real_jax.make_jaxpr(real_jax.vmap(real_jax.nn.relu))(batched)
    assert str(meshsim.make_jaxpr(meshsim.vmap(meshsim.nn.relu))(batched)) == str(want)


def test_equation_objects(real_jax):
    f_jax, _ = _user_functions(real_jax, "plain")
    f_ms, _ = _user_functions(meshsim, "plain")
    x = RNG.standard_normal((3,)).astype(np.float32)
    want = real_jax.make_jaxpr(f_jax)(x, x)
    got = meshsim.make_jaxpr(f_ms)(x, x)
    eqn, jeqn = got.jaxpr.eqns[0], want.jaxpr.eqns[0]
    assert eqn.primitive is meshsim.custom_derivatives.custom_jvp_call_p
    assert eqn.primitive.name == jeqn.primitive.name == "custom_jvp_call"
    assert sorted(eqn.params) == sorted(jeqn.params)
    assert eqn.params["jvp_jaxpr_fun"].debug_info.func_name == jeqn.params["jvp_jaxpr_fun"].debug_info.func_name
    assert str(eqn.params["call_jaxpr"]) == str(jeqn.params["call_jaxpr"])
    # Evaluated again (and differentiated through the evaluation), the equation keeps its rule.
    theirs = importlib.import_module(real_jax.__name__ + ".extend.core")
    np.testing.assert_allclose(np.asarray(MEXT.jaxpr_as_fun(got)(x, x)[0]),
                               np.asarray(theirs.jaxpr_as_fun(want)(x, x)[0]), rtol=1e-6)
    g = meshsim.grad(lambda v: meshsim.core.eval_jaxpr(got.jaxpr, got.consts, v, x)[0].sum())(x)
    wg = real_jax.grad(lambda v: real_jax.core.eval_jaxpr(want.jaxpr, want.consts, v, x)[0].sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(wg), rtol=1e-6)


def test_rule_errors(real_jax):
    # JAX's texts; JAX's eager rule shows the value it got, meshsim's the traced one.
    def bad_rules(J):
        @J.custom_jvp
        def f(x):
            return x

        f.defjvp(lambda p, t: p[0])

        @J.custom_jvp
        def g(x):
            return x

        g.defjvp(lambda p, t: ((p[0],), t[0]))
        return f, g

    for f_jax, f_ms in zip(bad_rules(real_jax), bad_rules(meshsim)):
        with pytest.raises(TypeError) as want:
            real_jax.grad(f_jax)(1.0)
        with pytest.raises(TypeError) as got:
            meshsim.grad(f_ms)(1.0)
        assert str(got.value).split(" but got")[0] == str(want.value).split(" but got")[0]


@pytest.mark.parametrize("seed", range(4))
def test_logaddexp_is_a_custom_jvp(real_jax, seed):
    # jnp.logaddexp and logaddexp2 (and softplus through it): their derivative stays finite
    # where an operand is infinite.
    rng = np.random.default_rng([seed, 19])
    shape = _shape(rng)
    x = _array(rng, shape, DTYPES[seed % 3]) * 10
    specials = np.array([np.inf, -np.inf, 0.0, np.nan], x.dtype)
    x.flat[:min(x.size, 4)] = specials[:min(x.size, 4)]
    y = x.dtype.type(rng.standard_normal()) if seed % 2 else _array(rng, shape, x.dtype)
    for name in ("logaddexp", "logaddexp2"):
        f_jax, f_ms = getattr(real_jax.numpy, name), getattr(meshsim.numpy, name)
        assert str(meshsim.make_jaxpr(f_ms)(x, y)) == str(real_jax.make_jaxpr(f_jax)(x, y)), name
        g_jax = real_jax.grad(lambda a, b: f_jax(a, b).astype(np.float32).sum(), (0, 1))(x, y)
        g_ms = meshsim.grad(lambda a, b: f_ms(a, b).astype(np.float32).sum(), (0, 1))(x, y)
        for w, g in zip(g_jax, g_ms):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2e-3,
                                       atol=1e-4)
    assert str(meshsim.make_jaxpr(meshsim.nn.softplus)(x)) == str(real_jax.make_jaxpr(real_jax.nn.softplus)(x))
    np.testing.assert_allclose(
        np.asarray(meshsim.grad(lambda a: meshsim.nn.softplus(a).astype(np.float32).sum())(x), np.float64),
        np.asarray(real_jax.grad(lambda a: real_jax.nn.softplus(a).astype(np.float32).sum())(x), np.float64),
        rtol=2e-3, atol=1e-4)
