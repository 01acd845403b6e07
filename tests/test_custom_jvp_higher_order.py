"""Higher-order derivatives of custom_jvp functions whose rule calls the function itself, as
JAX 0.10.2 computes them: the inner call keeps its rule, so grad of grad, hessian and jacfwd
or jacrev of a gradient differentiate the rule again instead of the primal. (The rule's
inner calls were plain functions, so a primal computed on the host by pure_callback raised
"Pure callbacks do not support JVP" at the second derivative, and a rule that is not the
primal's true derivative gave the primal's second derivative.) meshsim traces the rules when
the function is called, so the nesting is bounded (ad._NESTED_RULE_ORDERS): beyond it the
rule is differentiated as written."""
import numpy as np
import pytest

import meshsim

jax = pytest.importorskip("jax")


def _functions(j):
    jnp = j.numpy

    def host_sin(x):
        x = jnp.asarray(x)
        return j.pure_callback(lambda v: np.sin(v).astype(v.dtype), j.ShapeDtypeStruct(x.shape, x.dtype), x)

    @j.custom_jvp
    def on_host(x):
        return host_sin(x)

    @on_host.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return on_host(x), t * on_host(x + np.float32(np.pi / 2))  # cos, through the function itself

    @j.custom_jvp
    def shifted(x):
        # The rule is not this function's derivative: using it or not gives other numbers.
        return jnp.tanh(x)

    @shifted.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return shifted(x), t * (1.5 * shifted(0.5 * x) + 0.25)

    @j.custom_jvp
    def two_args(x, y):
        return jnp.sin(x) * y

    @two_args.defjvp
    def _(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return two_args(x, y), two_args(x + 1.0, y) * tx + two_args(x, 2.0) * ty

    return {"on_host": on_host, "shifted": shifted,
            "two_args": lambda x: jnp.sum(two_args(x, x * x))}


ORDERS = {
    "grad": lambda j, f: j.grad(f),
    "grad grad": lambda j, f: j.grad(j.grad(f)),
    "hessian": lambda j, f: j.hessian(f),
    "jacfwd grad": lambda j, f: j.jacfwd(j.grad(f)),
    "jacrev jacrev": lambda j, f: j.jacrev(j.jacrev(f)),
    "jit grad grad": lambda j, f: j.jit(j.grad(j.grad(f))),
}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("name", ["on_host", "shifted", "two_args"])
@pytest.mark.parametrize("seed", range(2))
def test_derivatives_use_the_rule_at_every_order(name, order, seed):
    x = np.float32(np.random.default_rng(seed).uniform(-2, 2))
    got = ORDERS[order](meshsim, _functions(meshsim)[name])(x)
    want = ORDERS[order](jax, _functions(jax)[name])(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)


def _branching(j):
    jnp = j.numpy

    @j.custom_jvp
    def f(x):
        return jnp.sin(x) if x > 0 else jnp.cos(x)

    @f.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), (2 * t if x > 0 else 3 * t)
    return f


@pytest.mark.parametrize("x", [1.0, -1.0, 0.0])
@pytest.mark.parametrize("entry", ["grad", "grad grad", "jvp", "vjp", "value"])
def test_python_control_flow_on_known_primals(entry, x):
    # Under an eager grad the primals are concrete, so the function and its rule may branch on
    # them (JAX's custom_jvp guide); under jit they are traced and JAX's error is raised.
    def run(j):
        f = _branching(j)
        return {"grad": lambda: j.grad(f)(x), "grad grad": lambda: j.grad(j.grad(f))(x),
                "jvp": lambda: j.jvp(f, (x,), (1.0,)), "vjp": lambda: j.vjp(f, x)[1](1.0),
                "value": lambda: f(x)}[entry]()
    got, want = run(meshsim), run(jax)
    for g, w in zip(meshsim.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    with pytest.raises(meshsim.errors.TracerBoolConversionError):
        meshsim.jit(meshsim.grad(_branching(meshsim)))(x)
