"""jax.scipy.stats's remaining distributions (binom, betabinom, nbinom, geom, multinomial, chi2,
dirichlet, gennorm, gumbel_l/r, pareto, truncnorm, vonmises, wrapcauchy, poisson.entropy)
against JAX over random arguments with the points each handles specially (outside the support,
invalid parameters): values, gradients in the continuous arguments, vmap, jit and errors."""
import importlib

import numpy as np
import pytest

import meshsim

jax = pytest.importorskip("jax")


def _f32(*arrays):
    return tuple(np.asarray(a, np.float32) for a in arrays)


def _counts(rng, n):
    return np.concatenate([rng.integers(-1, 12, n), [0, 0, 3]]).astype(np.float32)


# Each: rng, n -> the positional arguments; the indices of the arguments to differentiate.
ARGS = {
    "binom": (lambda r, n: _f32(_counts(r, n), r.integers(0, 10, n + 3), r.uniform(0, 1, n + 3)), (2,)),
    "betabinom": (lambda r, n: _f32(_counts(r, n) + r.choice([0, 0.5], n + 3), r.integers(0, 10, n + 3),
                                    r.uniform(-0.5, 4, n + 3), r.uniform(0.1, 4, n + 3)), (2, 3)),
    "nbinom": (lambda r, n: _f32(_counts(r, n), r.uniform(0.5, 8, n + 3), r.uniform(0.05, 0.95, n + 3)), (1, 2)),
    "geom": (lambda r, n: _f32(_counts(r, n), r.uniform(0.05, 1, n + 3)), (1,)),
    "chi2": (lambda r, n: _f32(r.uniform(-1, 12, n), r.uniform(0.5, 9, n)), (0, 1)),
    "gennorm": (lambda r, n: _f32(r.uniform(-4, 4, n), r.uniform(0.3, 4, n)), (0,)),
    "gumbel_l": (lambda r, n: _f32(r.uniform(-5, 3, n)), (0,)),
    "gumbel_r": (lambda r, n: _f32(r.uniform(-3, 6, n)), (0,)),
    "pareto": (lambda r, n: _f32(r.uniform(0, 8, n), r.uniform(0.5, 5, n)), (0, 1)),
    "truncnorm": (lambda r, n: _f32(r.uniform(-4, 4, n), *np.sort(r.uniform(-6, 6, (2, n)), axis=0)), (0, 1, 2)),
    "vonmises": (lambda r, n: _f32(r.uniform(-4, 4, n), r.uniform(-0.5, 30, n)), (0, 1)),
    "wrapcauchy": (lambda r, n: _f32(r.uniform(-1, 7, n), r.uniform(-0.2, 1.1, n)), (0, 1)),
}
# Distributions taking loc and scale: checked with both moved too.
LOC_SCALE = {"chi2", "gumbel_l", "gumbel_r", "pareto", "truncnorm"}
LOC_ONLY = {"binom", "betabinom", "nbinom", "geom"}
QUANTILES = {"ppf"}


def _methods(dist):
    module = importlib.import_module("jax.scipy.stats." + dist)
    return sorted(n for n in dir(module) if not n.startswith("_"))


def _cases():
    for dist in ARGS:
        for method in _methods(dist):
            yield dist, method


def _both(dist, method):
    return (getattr(importlib.import_module("meshsim.scipy.stats." + dist), method),
            getattr(importlib.import_module("jax.scipy.stats." + dist), method))


def _close(ours, theirs, rtol=2e-5, atol=1e-6):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)


def _args(dist, method, seed):
    rng = np.random.default_rng(seed)
    args = ARGS[dist][0](rng, 40)
    if method in QUANTILES:
        args = (np.concatenate([rng.uniform(0, 1, len(args[0]) - 4), [0, 1, -0.1, 1.1]]).astype(np.float32),
                *args[1:])
    kwargs = {}
    if dist in LOC_SCALE and seed % 2:
        kwargs = {"loc": np.float32(rng.uniform(-1, 1)), "scale": np.float32(rng.uniform(0.5, 2))}
    if dist in LOC_ONLY and seed % 2:
        kwargs = {"loc": np.float32(rng.integers(-2, 3))}
    return args, kwargs


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("dist,method", list(_cases()))
def test_values_match_jax(dist, method, seed):
    ours, theirs = _both(dist, method)
    args, kwargs = _args(dist, method, seed)
    _close(ours(*args, **kwargs), theirs(*args, **kwargs))


@pytest.mark.parametrize("dist,method", list(_cases()))
def test_gradients_vmap_and_jit_match_jax(dist, method):
    ours, theirs = _both(dist, method)
    args, kwargs = _args(dist, method, 5)
    wrt = tuple(i for i in ARGS[dist][1] if not (method in QUANTILES and i == 0))
    if wrt:
        def total(lib, fn):
            return lib.grad(lambda *a: lib.numpy.sum(lib.numpy.where(lib.numpy.isfinite(fn(*a, **kwargs)),
                                                                      fn(*a, **kwargs), 0.0)), wrt)
        for a, b in zip(total(meshsim, ours)(*args), total(jax, theirs)(*args)):
            _close(a, b, rtol=2e-4, atol=1e-5)
    rows = tuple(np.stack([a[:8], a[8:16]]) for a in args)
    _close(meshsim.vmap(lambda *a: ours(*a, **kwargs))(*rows), jax.vmap(lambda *a: theirs(*a, **kwargs))(*rows))
    _close(meshsim.jit(ours)(*args, **kwargs), jax.jit(theirs)(*args, **kwargs))


def test_float64_values_match_jax(x64_with_jax):
    rng = np.random.default_rng(3)
    for dist in ("binom", "chi2", "pareto", "truncnorm", "gumbel_r"):
        args = tuple(a.astype(np.float64) for a in ARGS[dist][0](rng, 20))
        for method in _methods(dist):
            ours, theirs = _both(dist, method)
            _close(ours(*args), theirs(*args), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("seed", range(3))
def test_dirichlet_matches_jax(seed):
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(2, 6)), int(rng.integers(1, 5))
    alpha = rng.uniform(0.3, 4, k).astype(np.float32)
    x = rng.dirichlet(np.ones(k), n).T.astype(np.float32)
    x[:, 0] = rng.uniform(0, 1, k)  # off the simplex
    for method in ("logpdf", "pdf"):
        ours, theirs = _both("dirichlet", method)
        for points in (x, x[:-1], x[:, 1]):
            _close(ours(points, alpha), theirs(points, alpha), rtol=1e-4)
        g = [lib.grad(lambda a, fn=fn: lib.numpy.sum(fn(x[:, 1:], a)))(alpha)
             for lib, fn in ((meshsim, ours), (jax, theirs))]
        _close(*g, rtol=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_multinomial_matches_jax(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 6))
    p = rng.dirichlet(np.ones(k)).astype(np.float32)
    n = int(rng.integers(0, 12))
    x = rng.multinomial(n, p).astype(np.int32)
    for method in ("logpmf", "pmf"):
        ours, theirs = _both("multinomial", method)
        for counts, total in ((x, n), (x, n + 1)):
            _close(ours(counts, total, p), theirs(counts, total, p), rtol=1e-5)
        g = [lib.grad(lambda q, fn=fn: fn(x, n, q))(p) for lib, fn in ((meshsim, ours), (jax, theirs))]
        _close(*g, rtol=1e-4)


ERRORS = {
    "dirichlet_alpha_rank": lambda s: s.dirichlet.logpdf(np.ones(3) / 3, np.ones((3, 1))),
    "dirichlet_x_length": lambda s: s.dirichlet.pdf(np.ones(5) / 5, np.ones(3)),
    "multinomial_float_counts": lambda s: s.multinomial.logpmf(np.ones(3), 3, np.ones(3) / 3),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_jax(case):
    def outcome(lib):
        try:
            return "ok", np.asarray(ERRORS[case](importlib.import_module(lib + ".scipy.stats")))
        except Exception as e:  # noqa: BLE001 - the class and message are compared
            return type(e).__name__, str(e)
    assert outcome("meshsim") == outcome("jax")


@pytest.mark.parametrize("seed", range(3))
def test_poisson_entropy_matches_jax(seed):
    rng = np.random.default_rng(seed)
    mu = np.concatenate([rng.uniform(0, 10, 6), rng.uniform(10, 100, 4), rng.uniform(100, 1e4, 3),
                         [0, 9.999, 10, 100]]).astype(np.float32)
    ours, theirs = _both("poisson", "entropy")
    _close(ours(mu), theirs(mu), rtol=1e-5)
    _close(ours(mu[:4].reshape(2, 2), np.zeros((3, 1, 1), np.float32)),
           theirs(mu[:4].reshape(2, 2), np.zeros((3, 1, 1), np.float32)))
    _close(meshsim.grad(lambda m: ours(m).sum())(mu[:10]), jax.grad(lambda m: theirs(m).sum())(mu[:10]),
           rtol=1e-4, atol=1e-5)
