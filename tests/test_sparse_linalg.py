"""jax.scipy.sparse.linalg's cg and bicgstab against JAX: random positive-definite (cg) and
general well-conditioned (bicgstab) systems in float32/float64/complex64, operators given as
arrays or functions, pytree right-hand sides, preconditioners, initial guesses, few-iteration
partial solves, jit, vmap, gradients through the operator and the right-hand side, errors."""
import numpy as np
import pytest

import meshsim
import meshsim.scipy.sparse.linalg as ours

jax = pytest.importorskip("jax")
theirs = pytest.importorskip("jax.scipy.sparse.linalg")


def _system(rng, n, dtype, positive_definite):
    a = rng.normal(size=(n, n))
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.normal(size=(n, n))
    a = a @ a.conj().T + n * np.eye(n) if positive_definite else a + 2 * n ** 0.5 * np.eye(n)
    b = rng.normal(size=n) + (1j * rng.normal(size=n) if np.issubdtype(dtype, np.complexfloating) else 0)
    return a.astype(dtype), b.astype(dtype)


def _close(a, b, rtol):
    for x, y in zip(meshsim.tree.leaves(a), jax.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol * max(1.0, float(np.abs(y).max(initial=0))))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("method", ["cg", "bicgstab"])
def test_solutions_match_jax(seed, method):
    rng = np.random.default_rng(seed)
    dtype = [np.float32, np.float64, np.complex64][seed % 3]
    n = int(rng.integers(2, 12))
    a, b = _system(rng, n, dtype, positive_definite=method == "cg")
    kw = {}
    if seed % 4 == 1:
        kw["M"] = np.diag(1 / np.diag(a)).astype(dtype)  # Jacobi preconditioner
    if seed % 4 == 2:
        kw["x0"] = rng.normal(size=n).astype(dtype)
    if seed % 4 == 3:
        kw["maxiter"] = 2  # a partial solve: the iterates themselves must agree
    operator = (lambda v: a @ v) if seed % 2 else a
    with meshsim.enable_x64(dtype == np.float64), jax.enable_x64(dtype == np.float64):
        got, info = getattr(ours, method)(operator, b, **kw)
        want, _ = getattr(theirs, method)(operator, b, **kw)
        assert info is None
        _close(got, want, 1e-4 if dtype != np.float64 else 1e-10)


def test_pytree_rhs_jit_and_vmap_match_jax():
    rng = np.random.default_rng(4)
    a, _ = _system(rng, 5, np.float32, True)
    c, _ = _system(rng, 3, np.float32, True)
    b = {"u": rng.normal(size=5).astype(np.float32), "v": rng.normal(size=3).astype(np.float32)}

    def matvec(x):
        return {"u": a @ x["u"], "v": c @ x["v"]}

    _close(meshsim.jit(lambda r: ours.cg(matvec, r)[0])(b), jax.jit(lambda r: theirs.cg(matvec, r)[0])(b), 1e-4)
    bs = rng.normal(size=(4, 5)).astype(np.float32)
    _close(meshsim.vmap(lambda r: ours.bicgstab(a, r)[0])(bs), jax.vmap(lambda r: theirs.bicgstab(a, r)[0])(bs),
           1e-4)


@pytest.mark.parametrize("method", ["cg", "bicgstab"])
def test_gradients_match_jax(method):
    rng = np.random.default_rng(6)
    a, b = _system(rng, 6, np.float32, positive_definite=True)

    def loss(module):
        def f(scale, rhs):
            x, _ = getattr(module, method)(lambda v: a @ v + scale * v, rhs)
            return (x ** 2).sum()
        return f

    got = meshsim.grad(loss(ours), argnums=(0, 1))(np.float32(0.5), b)
    want = jax.grad(loss(theirs), argnums=(0, 1))(np.float32(0.5), b)
    _close(got, want, 2e-3)


@pytest.mark.parametrize("call", [
    lambda m: m.cg(np.ones((2, 3), np.float32), np.ones(2, np.float32)),
    lambda m: m.cg(np.eye(2, dtype=np.float32), np.ones(2, np.float32), x0=np.ones(3, np.float32)),
    lambda m: m.cg(lambda v: v, {"a": np.ones(2, np.float32)}, x0=[np.ones(2, np.float32)]),
    lambda m: m.bicgstab("not an operator", np.ones(2, np.float32)),
])
def test_errors_match_jax(call):
    with pytest.raises(Exception) as got:
        call(ours)
    with pytest.raises(Exception) as want:
        call(theirs)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)


@pytest.mark.parametrize("seed", range(10))
def test_gmres_solutions_match_jax(seed):
    """Converged GMRES solutions (any restart length, preconditioned or not, both solve
    methods, pytrees) agree with JAX's and with the exact solution; info is 0 as in JAX."""
    rng = np.random.default_rng(300 + seed)
    dtype = [np.float32, np.float64, np.complex64][seed % 3]
    n = int(rng.integers(2, 14))
    a, b = _system(rng, n, dtype, positive_definite=False)
    kw = dict(restart=int(rng.integers(1, n + 3)), solve_method=["batched", "incremental"][seed % 2],
              tol=1e-6 if dtype != np.float64 else 1e-12)
    if seed % 4 == 1:
        kw["M"] = np.diag(1 / np.diag(a)).astype(dtype)
    if seed % 4 == 2:
        kw["x0"] = rng.normal(size=n).astype(dtype)
    operator = (lambda v: a @ v) if seed % 2 else a
    with meshsim.enable_x64(dtype == np.float64), jax.enable_x64(dtype == np.float64):
        got, info = ours.gmres(operator, b, **kw)
        want, want_info = theirs.gmres(operator, b, **kw)
        assert np.asarray(info).dtype == np.asarray(want_info).dtype and int(info) == int(want_info) == 0
        rtol = 2e-3 if dtype != np.float64 else 1e-8
        _close(got, want, rtol)
        np.testing.assert_allclose(np.asarray(got), np.linalg.solve(a.astype(np.complex128), b).astype(dtype),
                                   rtol=rtol, atol=rtol)


def test_gmres_pytree_jit_and_gradient_match_jax():
    rng = np.random.default_rng(8)
    a, _ = _system(rng, 4, np.float32, False)
    c, _ = _system(rng, 3, np.float32, False)
    b = (rng.normal(size=4).astype(np.float32), rng.normal(size=3).astype(np.float32))

    def matvec(x):
        return (a @ x[0], c @ x[1])

    _close(meshsim.jit(lambda r: ours.gmres(matvec, r)[0])(b), jax.jit(lambda r: theirs.gmres(matvec, r)[0])(b),
           1e-3)

    def loss(module):
        return lambda s, r: (module.gmres(lambda v: a @ v + s * v, r, tol=1e-7)[0] ** 2).sum()

    _close(meshsim.grad(loss(ours), argnums=(0, 1))(np.float32(0.3), b[0]),
           jax.grad(loss(theirs), argnums=(0, 1))(np.float32(0.3), b[0]), 5e-3)


@pytest.mark.parametrize("call", [
    lambda m: m.gmres(np.eye(2, dtype=np.float32), np.ones(2, np.float32), solve_method="lu"),
    lambda m: m.gmres(lambda v: v, {"a": np.ones(2, np.float32)}, x0=[np.ones(2, np.float32)]),
    lambda m: m.gmres(np.ones((2, 3), np.float32), np.ones(2, np.float32)),
])
def test_gmres_errors_match_jax(call):
    with pytest.raises(Exception) as got:
        call(ours)
    with pytest.raises(Exception) as want:
        call(theirs)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
