"""lax.custom_root and lax.custom_linear_solve against JAX: solutions, gradients through the
values the problem closes over and the right-hand side, jvp, jit, vmap, aux outputs, and the
error without a transpose solve."""
import numpy as np
import pytest

import meshsim
from tree_oracle import assert_trees_close


def _newton(jax, f, x0):
    return jax.lax.fori_loop(0, 30, lambda i, x: x - f(x) / jax.grad(f)(x), x0)


def _cube_root(jax, a):
    jnp = jax.numpy

    def solve(f, x0):
        return jax.lax.fori_loop(0, 40, lambda i, x: x - f(x) / (3 * x ** 2), x0)

    def tangent_solve(g, y):
        return jnp.linalg.solve(jax.jacobian(g)(y), y)
    return jax.lax.custom_root(lambda x: x ** 3 - a, jnp.ones_like(a), solve, tangent_solve)


def _linear(jax, m, b, symmetric, has_aux=False):
    jnp = jax.numpy

    def solve(matvec, rhs):
        x = jnp.linalg.solve(m, rhs)
        return (x, jnp.sum(x)) if has_aux else x

    def transpose_solve(vecmat, rhs):
        x = jnp.linalg.solve(m.T, rhs)
        return (x, jnp.sum(x)) if has_aux else x
    out = jax.lax.custom_linear_solve(lambda x: m @ x, b, solve,
                                      None if symmetric else transpose_solve,
                                      symmetric=symmetric, has_aux=has_aux)
    return out[0] if has_aux else out


def _problem(seed, n, symmetric):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(np.float32)
    m = a @ a.T + n * np.eye(n, dtype=np.float32) if symmetric else a + n * np.eye(n, dtype=np.float32)
    return m, rng.standard_normal(n).astype(np.float32)


CASES = {
    "sqrt_grad": lambda jax: [jax.grad(lambda a: jax.lax.custom_root(
        lambda x: x ** 2 - a, 1.0, lambda f, x0: _newton(jax, f, x0), lambda g, y: y / g(1.0)))(a)
        for a in (2.0, 9.0)],
    "sqrt_jit_aux": lambda jax: jax.jit(jax.grad(lambda a: jax.lax.custom_root(
        lambda x: x ** 2 - a, 1.0, lambda f, x0: (_newton(jax, f, x0), jax.numpy.float32(3)),
        lambda g, y: y / g(1.0), has_aux=True)[0] * a))(5.0),
    "cube_root_jacobian": lambda jax: jax.jacobian(lambda a: _cube_root(jax, a))(
        jax.numpy.array([1.0, 8.0, 27.0, 0.5])),
    "cube_root_jvp": lambda jax: jax.jvp(lambda a: _cube_root(jax, a), (jax.numpy.array([2.0, 3.0]),),
                                         (jax.numpy.array([1.0, -1.0]),)),
}
for _sym in (True, False):
    for _seed, _n in ((0, 3), (1, 5)):
        CASES[f"linear_grad_sym{_sym}_{_n}"] = (
            lambda jax, s=_sym, seed=_seed, n=_n: jax.grad(
                lambda m, b: jax.numpy.sum(jax.numpy.sin(_linear(jax, m, b, s))), (0, 1))(
                *_problem(seed, n, s)))
CASES["linear_aux_jit"] = lambda jax: jax.jit(jax.grad(
    lambda b, m: jax.numpy.sum(_linear(jax, m, b, False, has_aux=True) ** 2)))(
    _problem(2, 4, False)[1], _problem(2, 4, False)[0])
CASES["linear_jvp"] = lambda jax: jax.jvp(lambda b: _linear(jax, _problem(3, 4, False)[0], b, False),
                                          (_problem(3, 4, False)[1],), (np.ones(4, np.float32),))
CASES["linear_vmap"] = lambda jax: jax.vmap(lambda b: _linear(jax, _problem(4, 3, True)[0], b, True))(
    np.arange(12, dtype=np.float32).reshape(4, 3))


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(real_jax, name):
    ours, theirs = CASES[name](meshsim), CASES[name](real_jax)
    assert_trees_close(ours, theirs, rtol=2e-5, atol=2e-6)


def test_missing_transpose_solve(real_jax):
    messages = []
    m, b = _problem(5, 3, False)
    for jax in (meshsim, real_jax):
        solve = lambda matvec, rhs: jax.numpy.linalg.solve(m, rhs)  # noqa: E731
        np.testing.assert_allclose(jax.lax.custom_linear_solve(lambda x: m @ x, b, solve),
                                   np.linalg.solve(m, b), rtol=1e-5)
        with pytest.raises(TypeError) as err:
            jax.grad(lambda b: jax.numpy.sum(jax.lax.custom_linear_solve(lambda x: m @ x, b, solve)))(b)
        messages.append(str(err.value).splitlines()[0])
    assert messages[0] == messages[1]


@pytest.mark.parametrize("shapes", [((1, 1, 4), (1, 1, 4), (1, 1, 2), (1, 1, 2)),
                                    ((2, 3, 8), (2, 5, 8), (2, 3, 4), (2, 5, 4)),
                                    ((3, 4, 6), (3, 2, 6), (3, 4, 1), (3, 2, 1))])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_scaled_matmul(shapes, dtype):
    """Against the formula JAX documents (JAX's CPU backend has no lowering for it)."""
    rng = np.random.default_rng(len(shapes[0]) + shapes[0][2])
    a, b, sa, sb = [rng.uniform(0.5, 2, s).astype(np.float32) for s in shapes]
    jnp = meshsim.numpy
    out = meshsim.nn.scaled_matmul(*[jnp.asarray(x, dtype) for x in (a, b, sa, sb)],
                                   preferred_element_type=dtype)
    a, b, sa, sb = [np.asarray(jnp.asarray(x, dtype), np.float32) for x in (a, b, sa, sb)]
    expected = np.einsum("BMK,BNK->BMN", a * np.repeat(sa, a.shape[2] // sa.shape[2], axis=2),
                         b * np.repeat(sb, b.shape[2] // sb.shape[2], axis=2))
    assert out.dtype == np.dtype(jnp.dtype(dtype)) and out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out, np.float32), expected, rtol=1e-2 if dtype == "bfloat16" else 1e-5)


def test_scaled_matmul_errors_and_dot_general(real_jax):
    bad = [((1, 1, 4), (1, 1, 4), (1, 1, 2), (1, 1, 1)), ((1, 1, 4), (1, 1, 3), (1, 1, 1), (1, 1, 1)),
           ((1, 2, 4), (1, 1, 4), (1, 1, 1), (1, 1, 1)), ((1, 4), (1, 4), (1, 1), (1, 1))]
    for shapes in bad:
        errors = []
        for jax in (meshsim, real_jax):
            with pytest.raises(ValueError) as err:
                jax.nn.scaled_matmul(*[jax.numpy.ones(s) for s in shapes])
            errors.append(str(err.value))
        assert errors[0] == errors[1]
    x, y = np.ones((2, 3), np.float32), np.arange(12, dtype=np.float32).reshape(3, 4)
    outs = [jax.nn.scaled_dot_general(x, y, (((1,), (0,)), ((), ()))) for jax in (meshsim, real_jax)]
    np.testing.assert_array_equal(np.asarray(outs[0]), np.asarray(outs[1]))
    assert outs[0].dtype == outs[1].dtype
