"""What reverse-mode autodiff computes in the forward pass and what it leaves to the backward
pass, against JAX: a rule's primal-only work (cos x for sin, 2 x for a square) runs next to its
equation and is saved; the cotangent arithmetic runs backward, in the order JAX's transpose
emits it. Checked on the printed program of `grad`, which shows both."""
import numpy as np
import pytest

import meshsim

UNARY = {
    "sin": lambda jax: jax.numpy.sin, "cos": lambda jax: jax.numpy.cos,
    "tan": lambda jax: jax.numpy.tan, "tanh": lambda jax: jax.numpy.tanh,
    "exp": lambda jax: jax.numpy.exp, "exp2": lambda jax: jax.numpy.exp2,
    "log": lambda jax: jax.numpy.log, "log1p": lambda jax: jax.numpy.log1p,
    "expm1": lambda jax: jax.numpy.expm1, "sqrt": lambda jax: jax.numpy.sqrt,
    "rsqrt": lambda jax: jax.lax.rsqrt, "cbrt": lambda jax: jax.numpy.cbrt,
    "logistic": lambda jax: jax.nn.sigmoid, "gelu": lambda jax: jax.nn.gelu,
    "square": lambda jax: jax.numpy.square, "x**2": lambda jax: lambda a: a ** 2,
    "x**3": lambda jax: lambda a: a ** 3, "x**2.5": lambda jax: lambda a: a ** 2.5,
    "1/x": lambda jax: lambda a: 1 / a, "erf": lambda jax: jax.lax.erf,
    "erfc": lambda jax: jax.lax.erfc, "erf_inv": lambda jax: jax.lax.erf_inv,
    "arcsin": lambda jax: jax.numpy.arcsin, "arccos": lambda jax: jax.numpy.arccos,
    "arctan": lambda jax: jax.numpy.arctan, "sinh": lambda jax: jax.numpy.sinh,
    "cosh": lambda jax: jax.numpy.cosh, "arcsinh": lambda jax: jax.numpy.arcsinh,
    "arctanh": lambda jax: jax.numpy.arctanh, "cumsum": lambda jax: jax.numpy.cumsum,
}


def _grad_program(jax, f, x):
    return str(jax.make_jaxpr(jax.grad(lambda a: jax.numpy.sum(f(a))))(x))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_grad_program_of_a_function_as_jax_prints_it(real_jax, name):
    x = np.linspace(0.1, 0.9, 4).astype(np.float32)
    ours = _grad_program(meshsim, UNARY[name](meshsim), x)
    assert ours == _grad_program(real_jax, UNARY[name](real_jax), x)


def test_chain_keeps_forward_and_backward_halves_in_jax_order(real_jax):
    def f(jax):
        return lambda a: jax.numpy.sum(jax.numpy.tanh(jax.numpy.sin(a) * 3.0) ** 2 / jax.numpy.exp(a))
    x = np.linspace(-1, 1, 6).astype(np.float32)
    assert str(meshsim.make_jaxpr(meshsim.grad(f(meshsim)))(x)) == \
        str(real_jax.make_jaxpr(real_jax.grad(f(real_jax)))(x))
    np.testing.assert_allclose(np.asarray(meshsim.grad(f(meshsim))(x)),
                               np.asarray(real_jax.grad(f(real_jax))(x)), rtol=1e-6)


def test_shard_map_body_saves_what_jax_saves(real_jax):
    programs = []
    for jax in (meshsim, real_jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((8,), ("x",))
        f = jax.shard_map(lambda a: jnp_sin_cubed(jax, a), mesh=mesh, in_specs=P("x"), out_specs=P("x"))
        a = jax.device_put(np.linspace(0, 1, 16, dtype=np.float32), jax.NamedSharding(mesh, P("x")))
        programs.append(str(jax.make_jaxpr(jax.grad(lambda a: jax.numpy.sum(f(a))))(a)))
    ours, theirs = (p.split("_:f32[] = reduce_sum")[0] for p in programs)
    assert ours == theirs  # the forward shard_map, its residuals included


def jnp_sin_cubed(jax, a):
    return jax.numpy.sin(a) ** 3


def test_rule_that_cannot_run_early_still_differentiates(real_jax):
    # A cotangent reaching only one float output of a two-output equation differs from the
    # placeholders the rule ran on: the rule runs backward on what arrives, as written.
    def f(jax):
        def loss(x, y):
            keys, values = jax.lax.sort((x, y), num_keys=1)
            return jax.numpy.sum(keys ** 2) + jax.numpy.sum(values[:2] * 3.0)
        return jax.grad(loss, argnums=(0, 1))
    x = np.array([3.0, 1.0, 4.0, 1.5], np.float32)
    y = np.array([0.5, -2.0, 1.0, 0.25], np.float32)
    for ours, theirs in zip(f(meshsim)(x, y), f(real_jax)(x, y)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))

    def g(jax):
        return jax.grad(lambda x, y: jax.numpy.sum(jax.lax.sort((x, y), num_keys=1)[1] ** 2))
    np.testing.assert_array_equal(np.asarray(g(meshsim)(x, y)), np.asarray(g(real_jax)(x, y)))


def _vjp_state(jax, f, *primals):
    _, f_vjp = jax.vjp(f, *primals)
    described = [[type(x).__name__ if type(x).__name__ == "NotNeeded" else np.asarray(x).tolist()
                  for x in jax.tree.leaves(a, is_leaf=lambda x: type(x).__name__ == "NotNeeded")]
                 for a in f_vjp.args_res]
    return described, len(jax.tree.leaves(f_vjp)), len(f_vjp.opaque_residuals), f_vjp


@pytest.mark.parametrize("case", ["layer", "dict", "exp"])
def test_vjp_object_keeps_the_primals_it_reads_apart(real_jax, case):
    w = np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3)
    x = np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)
    cases = {
        "layer": (lambda jax: lambda W, v: jax.numpy.tanh(v @ W), (w, x)),
        "dict": (lambda jax: lambda p: jax.numpy.sin(p["a"]) * p["b"], ({"a": x, "b": 2 * x},)),
        "exp": (lambda jax: jax.numpy.exp, (x,)),
    }
    make, primals = cases[case]
    ours, theirs = (_vjp_state(lib, make(lib), *primals) for lib in (meshsim, real_jax))
    assert ours[:3] == theirs[:3]
    # args_res may be replaced before the call, as JAX's guide does.
    f_vjp = ours[3]
    f_vjp.args_res[0] = primals[0]
    ct = np.ones_like(np.asarray(make(meshsim)(*primals)))
    for got, want in zip(meshsim.tree.leaves(f_vjp(ct)), real_jax.tree.leaves(theirs[3](ct))):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
