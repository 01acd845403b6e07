"""jax.scipy.stats.gaussian_kde against JAX over random datasets (1-3 dims, weighted or not,
each bandwidth rule): its fields, evaluate/pdf/logpdf, the integrals, resample's draws for one
key, gradients through the estimate, jit and vmap of it as a pytree, and its errors."""
import numpy as np
import pytest

import meshsim
import meshsim.scipy.stats as ours

jax = pytest.importorskip("jax")
import jax.scipy.stats as theirs  # noqa: E402

BANDWIDTHS = [None, "scott", "silverman", 0.4, lambda kde: kde.neff ** -0.2]


def _close(a, b, rtol=2e-5, atol=1e-6):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _data(seed):
    rng = np.random.default_rng(seed)
    d, n = int(rng.integers(1, 4)), int(rng.integers(5, 30))
    dataset = rng.standard_normal((d, n)).astype(np.float32)
    weights = rng.uniform(0.1, 2, n).astype(np.float32) if seed % 2 else None
    points = rng.standard_normal((d, 7)).astype(np.float32) * 1.5
    return rng, dataset if d > 1 or seed % 3 else dataset[0], weights, points


@pytest.mark.parametrize("seed", range(10))
def test_fields_and_densities_match_jax(seed):
    rng, dataset, weights, points = _data(seed)
    bw = BANDWIDTHS[seed % len(BANDWIDTHS)]
    a, b = ours.gaussian_kde(dataset, bw, weights), theirs.gaussian_kde(dataset, bw, weights)
    assert (a.d, a.n) == (b.d, b.n)
    for field in ("neff", "dataset", "weights", "covariance", "inv_cov"):
        _close(getattr(a, field), getattr(b, field), rtol=1e-4)
    for method in ("evaluate", "pdf", "logpdf", "__call__"):
        _close(getattr(a, method)(points), getattr(b, method)(points), rtol=1e-4)
    _close(a.logpdf(points[:, 0]), b.logpdf(points[:, 0]), rtol=1e-4)
    mean, cov = rng.standard_normal(a.d).astype(np.float32), np.eye(a.d, dtype=np.float32) * 0.5
    _close(a.integrate_gaussian(mean, cov), b.integrate_gaussian(mean, cov), rtol=1e-4)
    other = rng.standard_normal((a.d, 9)).astype(np.float32)
    _close(a.integrate_kde(ours.gaussian_kde(other)), b.integrate_kde(theirs.gaussian_kde(other)), rtol=1e-4)
    if a.d == 1:
        _close(a.integrate_box_1d(-0.5, 1.0), b.integrate_box_1d(-0.5, 1.0), rtol=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_resample_draws_as_jax(seed):
    _, dataset, weights, _ = _data(seed)
    a, b = ours.gaussian_kde(dataset, weights=weights), theirs.gaussian_kde(dataset, weights=weights)
    for shape in ((), (5,)):
        _close(a.resample(meshsim.random.key(seed), shape), b.resample(jax.random.key(seed), shape), rtol=1e-4)


def test_gradient_jit_and_vmap_match_jax():
    _, dataset, _, points = _data(4)

    def density(lib, stats):
        return lambda data, x: lib.numpy.sum(stats.gaussian_kde(data).logpdf(x))

    g = [lib.grad(density(lib, s), (0, 1))(dataset, points) for lib, s in ((meshsim, ours), (jax, theirs))]
    for u, v in zip(*g):
        _close(u, v, rtol=1e-3, atol=1e-5)
    kdes = ours.gaussian_kde(dataset), theirs.gaussian_kde(dataset)
    _close(meshsim.jit(lambda k, x: k.pdf(x))(kdes[0], points), jax.jit(lambda k, x: k.pdf(x))(kdes[1], points),
           rtol=1e-4)
    stacked = np.stack([points, points[::-1] * 0.5])
    _close(meshsim.vmap(kdes[0].logpdf)(stacked), jax.vmap(kdes[1].logpdf)(stacked), rtol=1e-4)
    assert len(meshsim.tree_util.tree_leaves(kdes[0])) == len(jax.tree_util.tree_leaves(kdes[1])) == 5


ERRORS = {
    "one_element": lambda s: s.gaussian_kde(np.ones(1)),
    "list_dataset": lambda s: s.gaussian_kde([1.0, 2.0, 3.0]),
    "complex": lambda s: s.gaussian_kde(np.ones(4, np.complex64)),
    "bad_bandwidth": lambda s: s.gaussian_kde(np.arange(5.0), "wide"),
    "weights_2d": lambda s: s.gaussian_kde(np.arange(4.0), weights=np.ones((2, 2))),
    "weights_length": lambda s: s.gaussian_kde(np.arange(4.0), weights=np.ones(3)),
    "points_dimension": lambda s: s.gaussian_kde(np.arange(8.0).reshape(2, 4) ** 2).pdf(np.ones((3, 2))),
    "box_in_2d": lambda s: s.gaussian_kde(np.arange(8.0).reshape(2, 4) ** 2).integrate_box_1d(0, 1),
    "box_limits": lambda s: s.gaussian_kde(np.arange(5.0)).integrate_box_1d(np.zeros(2), 1),
    "integrate_box": lambda s: s.gaussian_kde(np.arange(5.0)).integrate_box(0, 1),
    "set_bandwidth": lambda s: s.gaussian_kde(np.arange(5.0)).set_bandwidth("scott"),
    "gaussian_mean": lambda s: s.gaussian_kde(np.arange(5.0)).integrate_gaussian(np.zeros(2), 1.0),
    "frozen": lambda s: setattr(s.gaussian_kde(np.arange(5.0)), "neff", 1.0),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_jax(case):
    def outcome(stats):
        try:
            ERRORS[case](stats)
            return "ok"
        except Exception as e:  # noqa: BLE001 - the class and message are compared
            return type(e).__name__, str(e)
    assert outcome(ours) == outcome(theirs)
