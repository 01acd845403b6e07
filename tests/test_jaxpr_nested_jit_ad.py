"""A jit called inside grad, value_and_grad and vjp stays a call, as in JAX 0.10.2: the outer
program holds a forward jit (the results and the residuals it computes itself; residuals that
are its operands or results are read there) and a transposed jit (residuals first, then the
cotangents that are not symbolic zeros; inputs no cotangent reaches get a zero outside it).
Compared with JAX's make_jaxpr over random programs: the outer equations with their types, and
the whole text where the differentiation rules emit the same equations. The nested jit's params
as JAX holds them, and values against JAX."""
import numpy as np
import pytest

import meshsim

# Operations whose derivatives meshsim and JAX write with the same equations, and ones they write
# differently (sin's residual is its input here, its cosine in JAX).
SAME_RULES = ("mul", "add", "sub", "neg", "scale")
OTHER_RULES = ("sin", "exp", "square")


def _op(J, name, a, b):
    jnp = J.numpy
    return {"mul": lambda: a * b, "add": lambda: a + b, "sub": lambda: a - b, "neg": lambda: -a,
            "scale": lambda: a * 3.0, "sin": lambda: jnp.sin(a), "exp": lambda: jnp.exp(a),
            "square": lambda: a * a}[name]()


def _random_program(seed, names):
    rng = np.random.default_rng(seed)
    steps = [(names[rng.integers(len(names))], int(rng.integers(2)), int(rng.integers(2)))
             for _ in range(rng.integers(1, 5))]
    num_out = int(rng.integers(1, 3))
    how = ("grad", "value_and_grad", "vjp")[rng.integers(3)]
    shape = tuple(int(d) for d in rng.integers(1, 5, rng.integers(0, 3)))

    def make(J):
        def inner(x, y):
            vals = [x, y]
            for name, i, j in steps:
                vals.append(_op(J, name, vals[-1 - i], vals[-1 - j]))
            return tuple(vals[-num_out:])

        jitted = J.jit(inner)

        def outer(x, y):
            return sum(o.sum() for o in jitted(x, y))

        if how == "grad":
            return J.grad(outer, argnums=(0, 1))
        if how == "value_and_grad":
            return J.value_and_grad(outer)
        return lambda x, y: J.vjp(outer, x, y)[1](np.float32(1.0))

    x = rng.normal(size=shape).astype(np.float32)
    y = rng.normal(size=shape).astype(np.float32)
    return make, (x, y)


def _outer_equations(closed):
    """The outer program's equations: primitive, the nested jit's name, and the operand and
    result types of the others (a jit's residuals depend on each rule's choice of them)."""
    def types(atoms):
        return [str(a.aval) for a in atoms]
    return [(e.primitive.name, e.params["name"]) if e.primitive.name == "jit" else
            (e.primitive.name, types(e.invars), types(e.outvars)) for e in closed.jaxpr.eqns]


@pytest.mark.parametrize("seed", range(12))
def test_outer_program_holds_forward_and_transposed_jits(real_jax, seed):
    make, args = _random_program(seed, SAME_RULES + OTHER_RULES)
    want = real_jax.make_jaxpr(make(real_jax))(*args)
    got = meshsim.make_jaxpr(make(meshsim))(*args)
    assert _outer_equations(got) == _outer_equations(want), f"JAX:\n{want}\nmeshsim:\n{got}"
    for w, g in zip(make(real_jax)(*args), make(meshsim)(*args)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", [2, 4, 5, 6, 7, 8, 9, 10, 14, 16, 17, 20])
def test_text_equals_jax_where_rules_agree(real_jax, seed):
    # Seeds whose programs meet no rule written in another order: 23 of seeds 0-39 (the others
    # meet mul with both operands differentiated, whose two cotangents JAX writes y first).
    make, args = _random_program(seed, SAME_RULES)
    want = str(real_jax.make_jaxpr(make(real_jax))(*args))
    assert str(meshsim.make_jaxpr(make(meshsim))(*args)) == want


def test_forwarded_residuals_and_dropped_zero_cotangents(real_jax):
    def make(J):
        inner = J.jit(lambda x, y: (x * y * 3.0, x - y))
        return J.grad(lambda x, y: inner(x, y)[0].sum())

    x = np.arange(3, dtype=np.float32)
    want = str(real_jax.make_jaxpr(make(real_jax))(x, x))
    got = str(meshsim.make_jaxpr(make(meshsim))(x, x))
    assert got == want
    # y is forwarded to the transposed jit as a residual; the unused second result's cotangent
    # is a symbolic zero and does not enter it.
    assert got.count("jit[") == 2


def _jit_equation(J):
    inner = J.jit(lambda x, y: (x * y, J.numpy.sin(x)))
    x = np.ones(3, np.float32)
    return J.make_jaxpr(lambda x, y: inner(x, y))(x, x).eqns[0]


def test_jit_params_as_jax_holds_them(real_jax):
    want, got = _jit_equation(real_jax), _jit_equation(meshsim)
    assert list(got.params) == list(want.params)
    for key in want.params:
        if key != "jaxpr":
            assert repr(got.params[key]) == repr(want.params[key]), key
    x, y = np.ones(3, np.float32), np.full(3, 2.0, np.float32)
    for w, g in zip(want.primitive.bind(x, y, **want.params), got.primitive.bind(x, y, **got.params)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _nn_top_call(J, name, x):
    eqns = J.make_jaxpr(getattr(J.nn, name))(x).eqns
    return eqns[0].params["name"] if len(eqns) == 1 and eqns[0].primitive.name == "jit" else None


def test_nn_functions_are_jits_where_jax_has_them(real_jax):
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    names = [n for n in dir(real_jax.nn) if not n.startswith("_")
             and callable(getattr(real_jax.nn, n)) and hasattr(meshsim.nn, n)]
    checked = 0
    for name in names:
        try:
            want = _nn_top_call(real_jax, name, x)
        except (TypeError, ValueError):
            continue  # needs more arguments than an array
        assert _nn_top_call(meshsim, name, x) == want, name
        checked += 1
    assert checked >= 25


def _bf16_loss_under_jit(J):
    jnp = J.numpy
    rng = np.random.default_rng(1)
    logits = jnp.asarray(rng.normal(size=(64,)).astype(np.float32), dtype=jnp.bfloat16)
    labels = jnp.asarray(rng.normal(size=(64,)).astype(np.float32))
    inner = J.jit(lambda v: jnp.exp(v) * 1.7)
    loss = J.jit(J.value_and_grad(lambda v: (labels * inner(v)).sum()))
    return np.asarray(loss(logits)[0])


@pytest.mark.xfail(strict=True, reason="XLA rounds the bfloat16 product to its type where its "
                   "operand exp is also read outside the call (a residual of the transposed jit); "
                   "meshsim's convert rewrite reads it unrounded (the rule is XLA's fusion's, "
                   "not yet modelled)")
def test_bf16_result_of_forward_jit_read_rounded(real_jax):
    np.testing.assert_array_equal(_bf16_loss_under_jit(meshsim), _bf16_loss_under_jit(real_jax))
