"""jax.numpy functions JAX 0.10.2 defines with a plain `jit` (not inline): arccosh (and acosh
calling it), angle, block, divmod, isreal, modf, nan_to_num, ptp (its `_ptp`), trapezoid and
sinc (whose value at 0 is a custom_jvp series term, so that it differentiates there).
Traced, each is one `jit` equation named as JAX names it, holding the body JAX's holds, with
its static arguments; to a user it is a PjitFunction. Against JAX on random shapes, dtypes and
arguments: the printed program, the repr and the values."""
import re

import numpy as np
import pytest

import meshsim

NAMES = ("arccosh", "acosh", "angle", "block", "divmod", "isreal", "modf", "nan_to_num", "trapezoid", "sinc")


def _masked(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+", "0x…", text)


def test_reprs_are_jaxs(real_jax):
    for name in NAMES:
        ours, theirs = getattr(meshsim.numpy, name), getattr(real_jax.numpy, name)
        assert _masked(repr(ours)) == _masked(repr(theirs)), name
    assert type(meshsim.numpy.ptp).__name__ == type(real_jax.numpy.ptp).__name__ == "function"


def _cases(J, rng):
    """(function, arguments) pairs on random shapes and dtypes."""
    jnp = J.numpy
    shape = tuple(int(d) for d in rng.integers(1, 5, rng.integers(1, 4)))
    dtype = rng.choice([np.float32, np.float16])
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    x.flat[0] = [np.nan, np.inf, -np.inf][rng.integers(3)]
    y = (rng.standard_normal(shape) + 4).astype(dtype)
    z = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    axis = int(rng.integers(-len(shape), len(shape)))
    keepdims = bool(rng.integers(2))
    return [
        (jnp.arccosh, (np.abs(y) + 1,)),
        (jnp.acosh, (np.abs(y) + 1,)),
        (lambda v: jnp.angle(v, deg=bool(keepdims)), (z,)),
        (jnp.angle, (x,)),
        (lambda a, b: jnp.block([[a, b], [b, a]]), (x, y)),
        (lambda a, b: jnp.block([a, b]), (x, y)),
        (jnp.divmod, (x, y)),
        (jnp.isreal, (z,)),
        (jnp.isreal, (x,)),
        (jnp.modf, (x,)),
        (jnp.nan_to_num, (x,)),
        (lambda v: jnp.nan_to_num(v, nan=1.5, posinf=7.0), (x,)),
        (lambda v: jnp.ptp(v, axis=axis, keepdims=keepdims), (x,)),
        (jnp.ptp, (y,)),
        (lambda v: jnp.trapezoid(v, axis=axis), (y,)),
        (lambda v: jnp.trapezoid(v, dx=0.5), (y,)),
        (jnp.sinc, (np.where(rng.integers(2, size=shape) == 0, 0, x).astype(dtype),)),
    ] + ([] if shape[axis] == 1 else [  # (a difference of one sample slices as JAX's does not)
        (lambda v, w: jnp.trapezoid(v, w, axis=axis), (y, np.sort(x, axis=axis)))])


@pytest.mark.parametrize("seed", range(6))
def test_programs_and_values_are_jaxs(real_jax, seed):
    theirs = _cases(real_jax, np.random.default_rng(seed))
    ours = _cases(meshsim, np.random.default_rng(seed))
    for k, ((f_jax, args), (f_ms, _)) in enumerate(zip(theirs, ours)):
        want = real_jax.make_jaxpr(f_jax)(*args)
        assert str(meshsim.make_jaxpr(f_ms)(*args)) == str(want), (k, str(want))
        for w, g in zip(real_jax.tree.leaves(f_jax(*args)), meshsim.tree.leaves(f_ms(*args))):
            w, g = np.asarray(w), np.asarray(g)
            assert g.dtype == w.dtype and g.shape == w.shape, k
            np.testing.assert_allclose(g.astype(np.complex128), w.astype(np.complex128), rtol=2e-3,
                                       atol=1e-3 if w.dtype == np.float16 else 1e-6, err_msg=str(k))


@pytest.mark.parametrize("order", range(1, 4))
def test_sinc_derivatives_at_zero(real_jax, order):
    def nth(J):
        f = J.numpy.sinc
        for _ in range(order):
            f = J.grad(f)
        return f
    points = np.array([0.0, 0.0, 0.3, -1.7], np.float32)
    for p in points:
        np.testing.assert_allclose(np.asarray(nth(meshsim)(p)), np.asarray(nth(real_jax)(p)), rtol=1e-5,
                                   atol=1e-6)
    want = real_jax.make_jaxpr(nth(real_jax))(points[0])
    assert meshsim.make_jaxpr(nth(meshsim))(points[0]).eqns[0].primitive.name == want.eqns[0].primitive.name
