"""meshsim.scipy.optimize (as jax.scipy.optimize): `minimize` with BFGS.

BFGS keeps an inverse-Hessian estimate, steps along -H g with a backtracking line search
(Armijo's sufficient decrease, halving up to 30 times), and stops when the gradient's
infinity norm is below `tol` (default 1e-5, as JAX's gtol) or after `maxiter` iterations.
Both loops are `while_loop`/`fori_loop`s, so it runs under jit with a traced start."""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

__all__ = ["minimize", "OptimizeResults"]


class OptimizeResults(NamedTuple):
    """What `minimize` returns (JAX's fields)."""
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


def minimize(fun: Callable, x0, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """Minimizes fun(x, *args) from `x0` (a 1-D array); `method` must be 'BFGS'."""
    import meshsim
    import meshsim.numpy as jnp
    from meshsim import lax
    if options is None:
        options = {}
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, got {args}")
    if method.lower() != "bfgs":
        raise ValueError(f"Method {method} not recognized")
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise ValueError("x0 must be a 1-dimensional array")
    gtol = 1e-5 if tol is None else tol
    maxiter = options.get("maxiter", x0.size * 200)
    value_and_grad = meshsim.value_and_grad(lambda x: fun(x, *args))
    n = x0.shape[0]
    eye = jnp.eye(n, dtype=x0.dtype)
    f0, g0 = value_and_grad(x0)

    def cond(state):
        x, f, g, h, k, nfev, failed = state
        return (k < maxiter) & (jnp.max(jnp.abs(g)) > gtol) & ~failed

    def body(state):
        x, f, g, h, k, nfev, failed = state
        p = -h @ g
        slope = g @ p

        def halve(i, carry):
            step, found, count = carry
            f_new = fun(x + step * p, *args)
            ok = (f_new <= f + 1e-4 * step * slope) & jnp.isfinite(f_new)
            return (jnp.where(found | ok, step, step * 0.5), found | ok,
                    count + jnp.where(found, 0, 1))

        step, found, evals = lax.fori_loop(0, 30, halve, (jnp.ones((), x.dtype), jnp.array(False),
                                                          jnp.array(0, jnp.int32)))
        s = step * p
        x_new = x + s
        f_new, g_new = value_and_grad(x_new)
        y = g_new - g
        sy = s @ y
        rho = jnp.where(sy > 0, 1.0 / jnp.where(sy > 0, sy, 1.0), 0.0)
        a = eye - rho * jnp.outer(s, y)
        h_new = jnp.where(sy > 0, a @ h @ a.T + rho * jnp.outer(s, s), h)
        keep = found
        return (jnp.where(keep, x_new, x), jnp.where(keep, f_new, f), jnp.where(keep, g_new, g),
                jnp.where(keep, h_new, h), k + 1, nfev + evals + 1, ~found)

    state = (x0, f0, g0, eye, jnp.array(0, jnp.int32), jnp.array(1, jnp.int32), jnp.array(False))
    x, f, g, h, k, nfev, failed = lax.while_loop(cond, body, state)
    converged = jnp.max(jnp.abs(g)) <= gtol
    status = jnp.where(converged, 0, jnp.where(failed, 3, 1)).astype(jnp.int32)
    return OptimizeResults(x=x, success=converged, status=status, fun=f, jac=g, hess_inv=h,
                           nfev=nfev, njev=k + 1, nit=k)
