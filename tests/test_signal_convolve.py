"""jax.scipy.signal's convolutions against JAX 0.10.2: convolve, correlate (direct and by FFT),
convolve2d, correlate2d and fftconvolve (also over chosen axes) on random shapes in every mode,
with mixed dtypes, gradients, under jit, and JAX's errors."""
import numpy as np
import pytest

import meshsim
import meshsim.scipy.signal as signal


def _shapes(rng, nd):
    return [tuple(int(v) for v in rng.integers(1, 7, size=nd)) for _ in range(2)]


def _outcome(fn):
    try:
        return np.asarray(fn())
    except Exception as e:  # noqa: BLE001 - the error is the outcome compared
        return type(e), str(e)


def _same_outcome(got, want):
    if isinstance(want, tuple):
        assert got == want
        return
    assert not isinstance(got, tuple), got
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolutions_match_jax(real_jax, seed, mode):
    rng = np.random.default_rng(seed)
    nd = 1 + seed % 3
    s1, s2 = _shapes(rng, nd)
    a = rng.standard_normal(s1).astype(np.float32)
    b = (rng.standard_normal(s2) * 4).astype(np.int32 if seed % 2 else np.float32)
    cases = [("convolve", {}), ("correlate", {}), ("convolve", {"method": "fft"}),
             ("correlate", {"method": "fft"}), ("fftconvolve", {})]
    if nd == 2:
        cases += [("convolve2d", {}), ("correlate2d", {}), ("fftconvolve", {"axes": 1})]
    for name, kwargs in cases:
        got = _outcome(lambda: getattr(signal, name)(a, b, mode=mode, **kwargs))
        want = _outcome(lambda: getattr(real_jax.scipy.signal, name)(a, b, mode=mode, **kwargs))
        _same_outcome(got, want)


@pytest.mark.parametrize("name", ["convolve", "correlate2d", "fftconvolve"])
def test_gradients_and_jit_match_jax(real_jax, name):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    ours = getattr(signal, name)
    theirs = getattr(real_jax.scipy.signal, name)
    got = meshsim.grad(lambda x, y: (ours(x, y, mode="same") ** 2).sum(), argnums=(0, 1))(a, b)
    want = real_jax.grad(lambda x, y: (theirs(x, y, mode="same") ** 2).sum(), argnums=(0, 1))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(meshsim.jit(ours)(a, b)), np.asarray(theirs(a, b)),
                               rtol=1e-4, atol=1e-4)


def test_errors_match_jax(real_jax):
    a, b = np.ones((3, 4), np.float32), np.ones((2, 5), np.float32)
    calls = [
        lambda s: s.convolve(a, b),  # neither input is the larger in every dimension
        lambda s: s.convolve(a, b[0]),
        lambda s: s.convolve(a, a, mode="middle"),
        lambda s: s.convolve(a, a, method="winograd"),
        lambda s: s.convolve2d(a, a, boundary="wrap"),
        lambda s: s.correlate2d(a[0], a[0]),
        lambda s: s.fftconvolve(a, b, mode="valid"),
        lambda s: s.fftconvolve(a, b[0]),
        lambda s: s.fftconvolve(a, b, axes=1),
        lambda s: s.convolve(a[:0], a),
    ]
    for call in calls:
        got = _outcome(lambda: call(signal))
        want = _outcome(lambda: call(real_jax.scipy.signal))
        assert isinstance(want, tuple)
        assert got == want


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fn", ["convolve", "correlate", "convolve2d", "correlate2d"])
def test_complex_input_matches_jax(real_jax, fn, seed):
    """Complex operands (either or both) through the direct convolution, with the gradient
    of a real loss by the first."""
    jsignal = real_jax.scipy.signal
    rng = np.random.default_rng(seed)
    a_shape, b_shape = _shapes(rng, 1 if fn in ("convolve", "correlate") else 2)
    a = (rng.standard_normal(a_shape) + 1j * rng.standard_normal(a_shape)).astype(np.complex64)
    b = rng.standard_normal(b_shape).astype(np.float32)
    if seed % 2:
        b = (b + 1j * rng.standard_normal(b_shape)).astype(np.complex64)
    for mode in ("full", "same", "valid"):
        _same_outcome(_outcome(lambda: getattr(signal, fn)(a, b, mode=mode)),
                      _outcome(lambda: getattr(jsignal, fn)(a, b, mode=mode)))
    loss = lambda lib, f: lambda x: lib.numpy.abs(f(x, b)).sum()  # noqa: E731
    _same_outcome(_outcome(lambda: meshsim.grad(loss(meshsim, getattr(signal, fn)))(a)),
                  _outcome(lambda: real_jax.grad(loss(real_jax, getattr(jsignal, fn)))(a)))
