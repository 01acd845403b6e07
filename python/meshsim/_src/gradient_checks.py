"""`jax.test_util`: derivatives checked against finite differences along one random
direction (`check_jvp`, `check_vjp`, `check_grads` up to a given order), with JAX's step
size (1e-4) and per-dtype gradient tolerances."""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from meshsim._src import ad, tree_util

EPS = 1e-4

# Tolerances of a gradient check, by dtype (both absolute and relative).
_GRADIENT_TOLERANCE = {
    np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5,
}


def _tolerance(dtype, given) -> float:
    if given is not None and not isinstance(given, dict):
        return float(given)
    table = {**_GRADIENT_TOLERANCE, **{np.dtype(k): v for k, v in (given or {}).items()}}
    return table.get(np.dtype(dtype), 1e-1)


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in tree_util.tree_leaves(tree)]


def _random_like(rng, tree):
    """Standard normal draws shaped like each leaf, in its dtype (as JAX draws them, from a
    np.random.RandomState, so that a check passes or fails at the same points as JAX's)."""
    def draw(x):
        x = np.asarray(x)
        normal = lambda: np.asarray(rng.randn(*x.shape), dtype=x.dtype)
        if np.issubdtype(x.dtype, np.complexfloating):
            return normal() + x.dtype.type(1j) * normal()
        return normal()
    return tree_util.tree_map(draw, tree)


def _axpy(a: float, x, y):
    """y + a * x leafwise, in y's dtypes."""
    return tree_util.tree_map(
        lambda xi, yi: np.asarray(yi) + np.multiply(np.asarray(xi), a, dtype=np.asarray(xi).dtype), x, y)


def _inner(xs, ys) -> np.ndarray:
    """The real part of sum(conj(x) . y) over the leaves, in their dtype."""
    return sum(np.real(np.dot(np.conj(x).reshape(-1), np.asarray(y).reshape(-1)))
               for x, y in zip(_leaves(xs), _leaves(ys)))


def _assert_close(got, want, atol, rtol, err_msg: str, dtype=None) -> None:
    """Leafwise closeness, within the tolerances of each expected leaf's dtype (or `dtype`)."""
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want), err_msg
    for g, w in zip(got, want):
        kind = w.dtype if dtype is None else dtype
        np.testing.assert_allclose(g.astype(np.complex128), w.astype(np.complex128),
                                   atol=_tolerance(kind, atol), rtol=_tolerance(kind, rtol), err_msg=err_msg)


def numerical_jvp(f: Callable, primals, tangents, eps: float = EPS):
    """The central difference (f(x + eps t) - f(x - eps t)) / (2 eps), in the outputs' dtypes."""
    up = f(*_axpy(eps, tangents, primals))
    down = f(*_axpy(-eps, tangents, primals))

    def difference(u, d):
        u, d = np.asarray(u), np.asarray(d)
        with np.errstate(invalid="ignore"):
            diff = np.where(u == d, np.zeros((), u.dtype), np.subtract(u, d, dtype=u.dtype))
        return np.multiply(diff, 0.5 / eps, dtype=u.dtype)
    return tree_util.tree_map(difference, up, down)


def check_jvp(f: Callable, f_jvp: Callable, args, atol=None, rtol=None, eps: float = EPS, err_msg: str = ""):
    """f_jvp(primals, tangents) against f and finite differences along a random tangent."""
    rng = np.random.RandomState(0)
    tangents = _random_like(rng, tuple(args))
    value, tangent_out = f_jvp(tuple(args), tangents)
    _assert_close(value, f(*args), atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    _assert_close(tangent_out, numerical_jvp(f, tuple(args), tangents, eps), atol, rtol,
                  f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f: Callable, f_vjp: Callable, args, atol=None, rtol=None, eps: float = EPS, err_msg: str = ""):
    """⟨t, vjp(ct)⟩ against ⟨J t, ct⟩, J t by finite differences, for random t and ct."""
    rng = np.random.RandomState(0)
    value, pullback = f_vjp(*args)
    _assert_close(value, f(*args), atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    tangents = _random_like(rng, tuple(args))
    tangent_out = numerical_jvp(f, tuple(args), tangents, eps)
    cotangent = _random_like(rng, value)
    conj = lambda tree: tree_util.tree_map(lambda v: np.conj(np.asarray(v)), tree)
    cotangent_in = conj(pullback(conj(cotangent)))
    _assert_close(_inner(tangents, cotangent_in), _inner(tangent_out, cotangent), atol, rtol,
                  f"{err_msg} cotangent projection" if err_msg else "cotangent projection")


def check_grads(f: Callable, args, order: int, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Checks forward- and reverse-mode derivatives of `f` at `args` up to `order` against finite
    differences; raises AssertionError when one does not match."""
    args = tuple(args)
    eps = eps or EPS

    def check(fun, at, k, what):
        if "fwd" in modes:
            label = f"JVP of {what}" if what else "JVP"
            check_jvp(fun, functools.partial(ad.jvp, fun), at, atol, rtol, eps, label)
            if k > 1:
                check(functools.partial(ad.jvp, fun), (at, at), k - 1, label)
        if "rev" in modes:
            label = f"VJP of {what}" if what else "VJP"
            check_vjp(fun, functools.partial(ad.vjp, fun), at, atol, rtol, eps, label)
            if k > 1:
                def pulled_back(*xs):
                    out, pullback = ad.vjp(fun, *xs)
                    return pullback(out)
                check(pulled_back, at, k - 1, label)

    check(f, args, order, "")
