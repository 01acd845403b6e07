"""jax.scipy.optimize.minimize(method='BFGS') against JAX 0.10.2: the minimizer and value on
smooth convex problems (eagerly and under jit with a traced start), extra args, the result's
fields, Rosenbrock's minimum, and JAX's errors."""
import importlib

import numpy as np
import pytest

import meshsim


def _problems(jnp):
    return [
        (lambda x: jnp.sum((x - jnp.arange(3.0)) ** 2 * jnp.array([1.0, 10.0, 100.0])) + 0.01 * jnp.sum(x ** 4),
         np.zeros(3, np.float32)),
        (lambda x: jnp.sum(jnp.cosh(x - 0.5)), np.full(5, 3.0, np.float32)),
        (lambda x: jnp.log(jnp.sum(jnp.exp(x))) + 0.5 * jnp.sum(x ** 2), np.float32([1.0, -2.0, 0.5])),
    ]


@pytest.mark.parametrize("i", range(3))
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_bfgs_matches_jax(real_jax, i, jitted):
    results = []
    for jax in (meshsim, real_jax):
        opt = importlib.import_module(jax.__name__ + ".scipy.optimize")
        fn, x0 = _problems(jax.numpy)[i]
        run = lambda x0: opt.minimize(fn, x0, method="BFGS")  # noqa: E731
        r = jax.jit(run)(x0) if jitted else run(x0)
        results.append(r)
    ours, theirs = results
    assert type(ours).__name__ == "OptimizeResults" and ours._fields == theirs._fields
    np.testing.assert_allclose(np.asarray(ours.x), np.asarray(theirs.x), atol=2e-3)
    np.testing.assert_allclose(float(ours.fun), float(theirs.fun), rtol=1e-4)
    # JAX's float32 line search sometimes reports failure at the minimum; ours converges there.
    assert bool(ours.success) or not bool(theirs.success)


def test_args_rosenbrock_and_errors():
    jnp = meshsim.numpy
    opt = importlib.import_module("meshsim.scipy.optimize")
    r = opt.minimize(lambda x, a: jnp.sum((x - a) ** 2), jnp.zeros(2), args=(jnp.ones(2),), method="BFGS")
    np.testing.assert_allclose(np.asarray(r.x), [1.0, 1.0], atol=1e-5)
    rosen = lambda x: jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)  # noqa: E731
    np.testing.assert_allclose(np.asarray(opt.minimize(rosen, jnp.zeros(4), method="BFGS").x), 1.0, atol=1e-3)
    with pytest.raises(ValueError, match="Method CG not recognized"):
        opt.minimize(rosen, jnp.zeros(2), method="CG")
    with pytest.raises(TypeError, match="must be a tuple"):
        opt.minimize(rosen, jnp.zeros(2), args=[1], method="BFGS")
