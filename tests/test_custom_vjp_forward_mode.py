"""Forward-mode autodiff of custom_vjp functions, against JAX 0.10.2: jvp, jacfwd and calling
linearize's function raise JAX's TypeError when a tangent reaches a custom_vjp function (its
rule says only how to pull cotangents back), wherever the call sits (nested jit, scan, cond,
vmap); linearize itself, reverse mode, and calls whose operands carry no tangent (integer,
stop_gradient'ed, or not depending on the differentiated inputs) are unaffected. meshsim's own
rules for what JAX differentiates in both modes (random.gamma's shape derivative) keep
forward mode."""
import numpy as np
import pytest
from outcomes import outcome

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _outcome(run):
    """("ok", the results as NumPy arrays), or the exception's class name and first line."""
    kind, value = outcome(run)
    return (kind, [np.asarray(v) for v in value]) if kind == "ok" else (kind, value.splitlines()[0])


def _custom_sin(jax):
    @jax.custom_vjp
    def f(x):
        return jax.numpy.sin(x)

    f.defvjp(lambda x: (f(x), jax.numpy.cos(x)), lambda c, g: (c * g,))
    return f


def _placements(jax, f, where: str):
    """f called at `where` inside a function of one array."""
    lax = jax.lax
    if where == "plain":
        return f
    if where == "jit":
        return jax.jit(f)
    if where == "scan":
        return lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=2)[0]
    if where == "cond":
        return lambda x: lax.cond(x.sum() > 0, f, lambda y: y * 2.0, x)
    if where == "vmap":
        return jax.vmap(f)
    if where == "jit_scan":
        return jax.jit(lambda x: lax.scan(lambda c, _: (f(c) * 0.5, None), x, None, length=3)[0])
    raise AssertionError(where)


MODES = ["jvp", "jacfwd", "linearize_call", "grad_sum", "vjp"]
WHERES = ["plain", "jit", "scan", "cond", "vmap", "jit_scan"]


def _differentiate(jax, fun, x, mode: str):
    jnp = jax.numpy
    if mode == "jvp":
        return jax.jvp(fun, (x,), (jnp.ones_like(x),))
    if mode == "jacfwd":
        return (jax.jacfwd(fun)(x),)
    if mode == "linearize_call":
        _, f_jvp = jax.linearize(fun, x)
        return (f_jvp(jnp.ones_like(x)),)
    if mode == "grad_sum":
        return (jax.grad(lambda y: fun(y).sum())(x),)
    if mode == "vjp":
        out, pullback = jax.vjp(fun, x)
        return (out, *pullback(jnp.ones_like(out)))
    raise AssertionError(mode)


@pytest.mark.parametrize("seed", range(12))
def test_tangent_through_custom_vjp(libs, seed):
    rng = np.random.default_rng(seed)
    mode = MODES[seed % len(MODES)]
    where = WHERES[rng.integers(len(WHERES))]
    x_np = rng.uniform(0.1, 2.0, size=tuple(rng.integers(1, 4, size=rng.integers(1, 3)))).astype(np.float32)
    outcomes = []
    for jax in libs:
        fun = _placements(jax, _custom_sin(jax), where)
        outcomes.append(_outcome(lambda: _differentiate(jax, fun, jax.numpy.asarray(x_np), mode)))
    (kind_m, val_m), (kind_j, val_j) = outcomes
    assert kind_m == kind_j, (mode, where, outcomes)
    if kind_m == "ok":
        for a, b in zip(val_m, val_j):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)
    else:
        assert val_m == val_j
    if mode in ("jvp", "jacfwd", "linearize_call"):
        assert kind_j == "TypeError"


@pytest.mark.parametrize("case", ["int_operand", "stop_gradient", "independent", "linearize_only"])
def test_calls_without_tangents(libs, case):
    """No tangent reaches the custom_vjp function: JAX differentiates forward without complaint."""
    results = []
    for jax in libs:
        jnp = jax.numpy
        f = _custom_sin(jax)
        x = jnp.asarray(np.float32(1.25))
        if case == "int_operand":
            run = lambda: jax.jvp(lambda x, n: f(jnp.asarray(n, jnp.float32)) * x, (x, 3),  # noqa: E731
                                  (jnp.float32(1.0), np.zeros((), jax.dtypes.float0)))
        elif case == "stop_gradient":
            run = lambda: jax.jvp(lambda x: f(jax.lax.stop_gradient(x)) * x, (x,), (jnp.float32(1.0),))  # noqa: E731
        elif case == "independent":
            run = lambda: jax.jvp(lambda x, y: f(y) + x, (x, x), (jnp.float32(1.0), jnp.float32(0.0)))  # noqa: E731
        else:
            run = lambda: jax.linearize(f, x)[:1]  # noqa: E731
        results.append(_outcome(run))
    if case == "independent":  # JAX raises here: the tangent of y is an explicit (non-symbolic) zero
        assert results[0][0] == results[1][0] == "TypeError"
        return
    assert results[0][0] == results[1][0] == "ok", results
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=2e-6)


def test_meshsim_rules_for_jax_primitives_keep_forward_mode(libs):
    """random.gamma's shape derivative is a custom_vjp inside meshsim; JAX's primitive has a
    JVP rule, so forward mode works on both sides."""
    outs = []
    for jax in libs:
        key = jax.random.key(3)
        a = jax.numpy.asarray(np.array([0.7, 1.5, 4.0], np.float32))
        outs.append(jax.jvp(lambda a: jax.random.gamma(key, a), (a,), (jax.numpy.ones_like(a),)))
    for a, b in zip(*outs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)
