"""Krylov solvers of A x = b for a linear operator A (a matrix, anything with `@`, or a
function) on pytrees of arrays, as jax.scipy.sparse.linalg: conjugate gradients (`cg`, A
positive definite), BiCGSTAB (`bicgstab`) and restarted GMRES (`gmres`). Each iterates in a `while_loop` until the
residual's norm is within max(tol * |b|, atol) or `maxiter` steps (default 10 * size of b), and
is wrapped in `lax.custom_linear_solve`, so that derivatives solve the transposed system instead
of differentiating the iterations. The second result (SciPy's convergence info) is None for cg and bicgstab; gmres gives 0, or -1
when the solution has NaNs."""
from __future__ import annotations

import functools
import operator

import numpy as np

__all__ = ["cg", "bicgstab", "gmres"]


def _jax():
    import meshsim
    import meshsim.numpy as jnp
    return meshsim, jnp


def _tree_map(f, *trees):
    return _jax()[0].tree.map(f, *trees)


def _leaves(tree):
    return _jax()[0].tree.leaves(tree)


def _vdot(x, y):
    jnp = _jax()[1]
    return jnp.vdot(x, y, precision="highest")


def _vdot_real_part(x, y):
    """Re(x^H y) without forming complex products: enough for z^H M z with M Hermitian."""
    jnp = _jax()[1]
    result = _vdot(x.real, y.real)
    if jnp.iscomplexobj(x) or jnp.iscomplexobj(y):
        result = result + _vdot(x.imag, y.imag)
    return result


def _vdot_real_tree(x, y):
    return sum(_leaves(_tree_map(_vdot_real_part, x, y)))


def _vdot_tree(x, y):
    return sum(_leaves(_tree_map(_vdot, x, y)))


def _add(x, y):
    return _tree_map(operator.add, x, y)


def _sub(x, y):
    return _tree_map(operator.sub, x, y)


def _scaled(scalar, tree):
    return _tree_map(lambda v: scalar * v, tree)


def _identity(x):
    return x


def _as_matvec(a):
    """A function applying the operator `a` (a function, a square array, or a square `@`)."""
    meshsim, jnp = _jax()
    from meshsim._src import core
    if callable(a):
        return a
    if isinstance(a, np.ndarray) or core.is_value(a):
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ValueError(f"linear operator must be a square matrix, but has shape: {a.shape}")
        return functools.partial(jnp.dot, a, precision="highest")
    if hasattr(a, "__matmul__"):
        if hasattr(a, "shape") and len(a.shape) != 2 or a.shape[0] != a.shape[1]:
            raise ValueError(f"linear operator must be a square matrix, but has shape: {a.shape}")
        return functools.partial(operator.matmul, a)
    raise TypeError(f"linear operator must be either a function or ndarray: {a}")


def _threshold(b, tol, atol):
    """The squared residual norm to reach (SciPy's non-legacy tolerances)."""
    jnp = _jax()[1]
    return jnp.maximum(jnp.square(tol) * _vdot_real_tree(b, b), jnp.square(atol))


def _cg_solve(A, b, x0, *, maxiter, tol, atol, M):
    meshsim, jnp = _jax()
    goal = _threshold(b, tol, atol)

    def unconverged(state):
        _, r, gamma, _, k = state
        residual = gamma.real if M is _identity else _vdot_real_tree(r, r)
        return (residual > goal) & (k < maxiter)

    def step(state):
        x, r, gamma, p, k = state
        ap = A(p)
        alpha = gamma / _vdot_real_tree(p, ap).astype(dtype)
        x = _add(x, _scaled(alpha, p))
        r = _sub(r, _scaled(alpha, ap))
        z = M(r)
        gamma_next = _vdot_real_tree(r, z).astype(dtype)
        p = _add(z, _scaled(gamma_next / gamma, p))
        return x, r, gamma_next, p, k + 1

    r0 = _sub(b, A(x0))
    z0 = M(r0)
    dtype = jnp.result_type(*_leaves(z0))
    start = (x0, r0, _vdot_real_tree(r0, z0).astype(dtype), z0, 0)
    return meshsim.lax.while_loop(unconverged, step, start)[0]


def _bicgstab_solve(A, b, x0, *, maxiter, tol, atol, M):
    meshsim, jnp = _jax()
    goal = _threshold(b, tol, atol)

    def unconverged(state):
        r, k = state[1], state[-1]
        return (_vdot_real_tree(r, r) > goal) & (k < maxiter) & (k >= 0)  # k < 0: breakdown

    def step(state):
        x, r, rhat, alpha, omega, rho, p, q, k = state
        rho_next = _vdot_tree(rhat, r)
        beta = rho_next / rho * alpha / omega
        p = _add(r, _scaled(beta, _sub(p, _scaled(omega, q))))
        phat = M(p)
        q = A(phat)
        alpha = rho_next / _vdot_tree(rhat, q)
        s = _sub(r, _scaled(alpha, q))
        done_early = _vdot_real_tree(s, s) < goal
        shat = M(s)
        t = A(shat)
        omega = _vdot_tree(t, s) / _vdot_tree(t, t)
        pick = functools.partial(jnp.where, done_early)
        x = _tree_map(pick, _add(x, _scaled(alpha, phat)),
                      _add(x, _add(_scaled(alpha, phat), _scaled(omega, shat))))
        r = _tree_map(pick, s, _sub(s, _scaled(omega, t)))
        k = jnp.where((omega == 0) | (alpha == 0), -11, k + 1)
        k = jnp.where(rho_next == 0, -10, k)
        return x, r, rhat, alpha, omega, rho_next, p, q, k

    r0 = _sub(b, A(x0))
    dtype = jnp.result_type(*_leaves(b))
    one = jnp.asarray(1, dtype=dtype)
    start = (x0, r0, r0, one, one, one, r0, r0, 0)
    return meshsim.lax.while_loop(unconverged, step, start)[0]


def _solve(solver, A, b, x0, *, tol, atol, maxiter, M, check_symmetric=False):
    meshsim, jnp = _jax()
    if x0 is None:
        x0 = _tree_map(jnp.zeros_like, b)
    b, x0 = meshsim.device_put((b, x0))
    if maxiter is None:
        maxiter = 10 * sum(leaf.size for leaf in _leaves(b))
    M = _identity if M is None else _as_matvec(M)
    A = _as_matvec(A)
    if meshsim.tree.structure(x0) != meshsim.tree.structure(b):
        raise ValueError("x0 and b must have matching tree structure: "
                         f"{meshsim.tree.structure(x0)} vs {meshsim.tree.structure(b)}")
    shapes_x0, shapes_b = [np.shape(v) for v in _leaves(x0)], [np.shape(v) for v in _leaves(b)]
    if shapes_x0 != shapes_b:
        raise ValueError(f"arrays in x0 and b must have matching shapes: {shapes_x0} vs {shapes_b}")
    solve = functools.partial(solver, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    # A real positive-definite operator is symmetric.
    symmetric = check_symmetric and not any(jnp.iscomplexobj(v) for v in _leaves(b))
    x = meshsim.lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve, symmetric=symmetric)
    return x, None


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solves A x = b for a Hermitian positive-definite A by (preconditioned, with M)
    conjugate gradients. Returns (x, None)."""
    return _solve(_cg_solve, A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M, check_symmetric=True)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solves A x = b for a general A by (preconditioned, with M) BiCGSTAB. Returns (x, None)."""
    return _solve(_bicgstab_solve, A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M)


def _unit(v, floor):
    """v / |v| and |v|, or zeros and 0 when |v| is at most `floor`."""
    jnp = _jax()[1]
    norm = jnp.sqrt(_vdot_real_part(v, v))
    keep = norm > floor
    return jnp.where(keep, v / norm.astype(v.dtype), 0), jnp.where(keep, norm, 0)


def _gmres_cycle(A, M, b, x, restart: int):
    """One restart cycle on flat vectors: `restart` Arnoldi steps from the preconditioned
    residual (stopping at a breakdown), then x plus the Krylov combination minimizing the
    residual (normal equations of the small Hessenberg system)."""
    meshsim, jnp = _jax()
    dtype = x.dtype
    eps = np.finfo(dtype).eps
    start, norm0 = _unit(M(b - A(x)), eps)
    basis = jnp.zeros((x.shape[0], restart + 1), dtype).at[:, 0].set(start)
    # Row k holds Arnoldi step k's coefficients; rows not reached stay those of the identity.
    hessenberg = jnp.eye(restart, restart + 1, dtype=dtype)

    def arnoldi(state):
        basis, hessenberg, _, k = state
        v = M(A(basis[:, k]))
        _, v_norm = _unit(v, eps)
        coefficients = jnp.zeros(restart + 1, dtype)
        for _ in range(2):  # classical Gram-Schmidt, twice
            h = jnp.matmul(basis.conj().T, v, precision="highest")
            v = v - jnp.matmul(basis, h, precision="highest")
            coefficients = coefficients + h
        v, norm = _unit(v, eps * v_norm)
        basis = basis.at[:, k + 1].set(v)
        hessenberg = hessenberg.at[k, :].set(coefficients.at[k + 1].set(norm.astype(dtype)))
        return basis, hessenberg, norm == 0, k + 1

    basis, hessenberg, _, _ = meshsim.lax.while_loop(
        lambda state: (state[3] < restart) & ~state[2], arnoldi, (basis, hessenberg, False, 0))
    rhs = jnp.zeros(restart + 1, dtype).at[0].set(norm0.astype(dtype))
    h = hessenberg.T
    y = meshsim.scipy.linalg.solve(jnp.matmul(h.conj().T, h, precision="highest"),
                                   jnp.matmul(h.conj().T, rhs, precision="highest"), assume_a="pos")
    return x + jnp.matmul(basis[:, :-1], y, precision="highest")


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None, solve_method="batched"):
    """Solves A x = b for a general A by GMRES restarted every `restart` steps, left
    preconditioned by M, for at most `maxiter` cycles. Returns (x, info)."""
    import meshsim.scipy.linalg  # noqa: F401  (the least-squares step's solve)
    meshsim, jnp = _jax()
    from meshsim.flatten_util import ravel_pytree
    if x0 is None:
        x0 = _tree_map(jnp.zeros_like, b)
    M = _identity if M is None else _as_matvec(M)
    A = _as_matvec(A)
    b, x0 = meshsim.device_put((b, x0))
    size = sum(leaf.size for leaf in _leaves(b))
    maxiter = 10 * size if maxiter is None else maxiter
    restart = min(restart, size)
    if meshsim.tree.structure(x0) != meshsim.tree.structure(b):
        raise ValueError("x0 and b must have matching tree structure: "
                         f"{meshsim.tree.structure(x0)} vs {meshsim.tree.structure(b)}")
    if solve_method not in ("incremental", "batched"):
        raise ValueError(f"invalid solve_method {solve_method}, must be either 'incremental' or 'batched'")
    b_norm = jnp.sqrt(_vdot_real_tree(b, b))
    goal = jnp.maximum(tol * b_norm, atol)

    def solve(matvec, rhs):
        flat_b, unravel = ravel_pytree(rhs)
        flat_x0, _ = ravel_pytree(x0)

        def flat(f):
            return lambda v: ravel_pytree(f(unravel(v)))[0]

        flat_a, flat_m = flat(matvec), flat(M)

        def residual_norm(x):
            r = flat_m(flat_b - flat_a(x))
            return jnp.sqrt(_vdot_real_part(r, r))

        def unconverged(state):
            x, k = state
            return (k < maxiter) & (residual_norm(x) > goal)

        def cycle(state):
            x, k = state
            return _gmres_cycle(flat_a, flat_m, flat_b, x, restart), k + 1

        x, _ = meshsim.lax.while_loop(unconverged, cycle, (flat_x0.astype(flat_b.dtype), 0))
        return unravel(x)

    x = meshsim.lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    failed = jnp.isnan(jnp.sqrt(_vdot_real_tree(x, x)))
    return x, jnp.where(failed, -1, 0)
