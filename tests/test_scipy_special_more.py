"""The integral-defined and hypergeometric functions of `jax.scipy.special` (dawsn, fresnel,
sici, spence, wofz, owens_t, hyp1f1, hyp2f1, bessel_jn) against JAX 0.10.2: values over random
arguments in float32 and float64 (with the ranges' boundaries and the special cases), dtypes for
the half-precision types, derivatives against JAX and finite differences, jit and vmap, and the
errors JAX raises."""

import numpy as np
import pytest

import meshsim
import meshsim.scipy.special as msp
from x64_mode import x64

RNG = np.random.default_rng(17)


def _real_line(dtype, n=120):
    x = RNG.standard_normal(n) * 6
    edges = [0, 1, -1, 0.5, 1.5, 2.0, 3.25, 6.25, 4, 8, 1.6, 36975, -4e4, 1e10, np.inf, -np.inf]
    return np.concatenate([x, edges]).astype(dtype)


def _hyp1f1_args(dtype):
    a, b, x = RNG.uniform(0.1, 5, 60), RNG.uniform(0.1, 5, 60), RNG.uniform(-10, 10, 60)
    a[:4], b[:4] = [0, 2, 1, 3], [1, 2, 0, 0]
    x[-3:] = [150, -120, 0]
    return a.astype(dtype), b.astype(dtype), x.astype(dtype)


def _hyp2f1_args(dtype):
    n = 80
    a, b = RNG.uniform(-3, 3, n), RNG.uniform(-3, 3, n)
    c, x = RNG.uniform(0.5, 6, n), RNG.uniform(-1, 0.9, n)
    a[:5], b[5:8] = [-2, -3, 0, 1, 2], [-1, -4, 2]     # terminating series and a = 0
    x[8:20] = RNG.uniform(0.91, 0.99, 12)              # the 1 - x transform ...
    c[8:16] = a[8:16] + b[8:16] + np.array([2, -1, 3, -2, 0, 1, -3, 4])  # ... at integer c - a - b
    x[20:24], c[24:26] = [1.0, 1.5, 0.0, 1.0], [0.0, -2.0]
    c[26], b[27] = a[26], c[27]                         # the closed forms (1 - x)^-b, (1 - x)^-a
    return tuple(v.astype(dtype) for v in (a, b, c, x))


CASES = {
    "dawsn": lambda sp, dt: sp.dawsn(_real_line(dt)),
    "fresnel": lambda sp, dt: sp.fresnel(_real_line(dt)),
    "sici": lambda sp, dt: sp.sici(_real_line(dt)),
    "spence": lambda sp, dt: sp.spence(np.abs(_real_line(dt))),
    "owens_t": lambda sp, dt: sp.owens_t(
        np.concatenate([RNG.standard_normal(60) * 3, [0, 1, 2, np.nan]]).astype(dt),
        np.concatenate([RNG.standard_normal(60) * 3, [1, -1, 0, 1]]).astype(dt)),
    "wofz": lambda sp, dt: sp.wofz((RNG.standard_normal(80) * 5 + 1j * RNG.standard_normal(80) * 5)
                                   .astype(np.result_type(dt, np.complex64))),
    "wofz_real": lambda sp, dt: sp.wofz(_real_line(dt)[:-3]),
    "hyp1f1": lambda sp, dt: sp.hyp1f1(*_hyp1f1_args(dt)),
    "hyp2f1": lambda sp, dt: sp.hyp2f1(*_hyp2f1_args(dt)),
    "bessel_jn": lambda sp, dt: sp.bessel_jn(RNG.uniform(0.01, 25, (3, 5)).astype(dt), v=6),
    "bessel_jn_n_iter": lambda sp, dt: sp.bessel_jn(RNG.uniform(0.01, 40, 7).astype(dt), v=3, n_iter=80),
}
# Relative tolerances: float32 hyp2f1 loses digits to cancellation near x = 1 (both libraries).
RTOL = {np.float32: {"hyp2f1": 5e-4, "sici": 1e-4},
        np.float64: {"hyp2f1": 1e-11, "sici": 1e-11}}


def _draw(case, sp, dtype):
    """The case's result for one library, drawing the same arguments for both."""
    state = RNG.bit_generator.state
    out = CASES[case](sp, dtype)
    RNG.bit_generator.state = state
    return out


def _compare(ours, theirs, rtol):
    ours_l, theirs_l = meshsim.tree.leaves(ours), meshsim.tree.leaves(theirs)
    assert len(ours_l) == len(theirs_l)
    for a, b in zip(ours_l, theirs_l):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-30 if a.dtype.itemsize > 4 else 1e-37)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_match_jax(real_jax, case, dtype):
    import jax.scipy.special as jsp
    with x64(meshsim, real_jax):
        ours = _draw(case, msp, dtype)
        theirs = _draw(case, jsp, dtype)
    default = 2e-6 if dtype == np.float32 else 1e-13
    _compare(ours, theirs, RTOL[dtype].get(case, default))


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
@pytest.mark.parametrize("name", ["dawsn", "fresnel", "sici"])
def test_half_precision_computes_in_float32(real_jax, name, dtype):
    import jax.scipy.special as jsp
    x = np.linspace(-7, 7, 29).astype(real_jax.numpy.dtype(dtype))
    _compare(getattr(msp, name)(x), getattr(jsp, name)(x), 0)


GRADS = {
    "dawsn": ((1.3,), 0), "fresnel": ((0.8,), 0), "sici": ((2.5,), 0), "wofz": ((0.7 + 0.4j,), 0),
    "owens_t": ((0.6, 1.7), (0, 1)), "hyp1f1": ((1.5, 2.5, 0.8), (0, 1, 2)),
    "hyp2f1": ((0.7, 1.2, 2.9, 0.4), (0, 1, 2, 3)),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_derivatives_match_jax_and_finite_differences(real_jax, name):
    import jax.scipy.special as jsp
    args, argnums = GRADS[name]
    with x64(meshsim, real_jax):
        def scalar(sp):
            def f(*a):
                out = getattr(sp, name)(*a)
                out = sum(out) if isinstance(out, tuple) else out
                return out.real if out.dtype.kind == "c" else out
            return f
        ours = meshsim.grad(scalar(msp), argnums=argnums)(*args)
        theirs = real_jax.grad(scalar(jsp), argnums=argnums)(*args)
        _compare(ours, theirs, 1e-9)
        if np.iscomplexobj(args[0]):
            return
        f = scalar(msp)
        for i, g in zip(np.atleast_1d(argnums), meshsim.tree.leaves(ours)):
            step = np.zeros(len(args))
            step[i] = 1e-6
            numeric = (float(f(*(np.array(args) + step))) - float(f(*(np.array(args) - step)))) / 2e-6
            np.testing.assert_allclose(float(g), numeric, rtol=1e-6)


@pytest.mark.parametrize("name,args", [("dawsn", (1.3,)), ("hyp1f1", (1.5, 2.5, 0.8)),
                                       ("hyp2f1", (0.7, 1.2, 2.9, 0.95)), ("owens_t", (0.6, 1.7)),
                                       ("spence", (0.7,))])
def test_jit_and_vmap_agree_with_eager(name, args):
    f = getattr(msp, name)
    args = tuple(np.float32(a) for a in args)
    eager = f(*args)
    np.testing.assert_allclose(np.asarray(meshsim.jit(f)(*args)), np.asarray(eager), rtol=1e-6)
    scales = np.float32([0.5, 1.0, 0.9])
    batched = meshsim.vmap(lambda s: f(*args[:-1], args[-1] * s))(scales)
    each = [np.asarray(f(*args[:-1], args[-1] * s)) for s in scales]
    np.testing.assert_allclose(np.asarray(batched), each, rtol=1e-6)


def test_errors_match_jax(real_jax):
    import jax.scipy.special as jsp
    checks = [
        (lambda sp: sp.dawsn(np.complex64(1)), ValueError),
        (lambda sp: sp.hyp1f1(1.0, 2.0, np.complex64(1)), ValueError),
        (lambda sp: sp.sici(np.complex64(1)), ValueError),
        (lambda sp: sp.spence(np.int32(1)), TypeError),
        (lambda sp: sp.fresnel(np.complex64(1)), NotImplementedError),
        (lambda sp: sp.bessel_jn(np.complex64(1), v=2), TypeError),
        (lambda sp: sp.bessel_jn(1.0, v=1.5), TypeError),
    ]
    for make, exc in checks:
        with pytest.raises(exc) as theirs:
            make(jsp)
        with pytest.raises(exc) as ours:
            make(msp)
        assert str(ours.value) == str(theirs.value)
