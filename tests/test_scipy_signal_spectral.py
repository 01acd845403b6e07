"""jax.scipy.signal's stft, istft, csd and welch against JAX: random lengths, segment sizes,
overlaps, FFT lengths, windows, boundaries, detrending, scalings, averages, axes and dtypes
(real and complex), round trips through istft, gradients, and JAX's errors."""
import numpy as np
import pytest

import meshsim
import meshsim.scipy.signal as ours

jax = pytest.importorskip("jax")
theirs = pytest.importorskip("jax.scipy.signal")


def _close(a, b, rtol=2e-5, atol=2e-6):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * max(1.0, float(np.max(np.abs(b), initial=0))))


def _signal(rng, complex_=False, ndim=None):
    ndim = ndim or int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 4)) for _ in range(ndim - 1)] + [int(rng.integers(24, 90))]
    x = rng.normal(size=shape).astype(np.float32)
    if complex_:
        x = (x + 1j * rng.normal(size=shape)).astype(np.complex64)
    axis = int(rng.integers(-ndim, ndim)) if ndim > 1 and rng.integers(0, 2) else -1
    return np.moveaxis(x, -1, axis), axis


def _segment_options(rng, n):
    nperseg = int(rng.integers(4, min(n, 32) + 1))
    noverlap = [None, int(rng.integers(0, nperseg))][int(rng.integers(0, 2))]
    nfft = [None, nperseg + int(rng.integers(0, 8))][int(rng.integers(0, 2))]
    return dict(nperseg=nperseg, noverlap=noverlap, nfft=nfft)


@pytest.mark.parametrize("seed", range(14))
def test_stft_matches_jax(seed):
    rng = np.random.default_rng(seed)
    x, axis = _signal(rng, complex_=seed % 5 == 4)
    kw = _segment_options(rng, x.shape[axis])
    kw.update(axis=axis, boundary=["zeros", None, "even", "odd", "constant"][seed % 5],
              padded=bool(seed % 3), detrend=[False, "constant", "linear"][seed % 3],
              window=["hann", "hamming", ("tukey", 0.25)][seed % 3], fs=[1.0, 2.5][seed % 2],
              return_onesided=seed % 4 != 3)
    with np.errstate(all="ignore"):
        got = ours.stft(x, **kw)
        want = theirs.stft(x, **kw)
    for a, b in zip(got, want):
        _close(a, b)


@pytest.mark.parametrize("seed", range(14))
def test_welch_and_csd_match_jax(seed):
    rng = np.random.default_rng(100 + seed)
    x, axis = _signal(rng, complex_=seed % 7 == 6)
    kw = _segment_options(rng, x.shape[axis])
    if seed % 4 == 0:
        kw.update(nperseg=None, nfft=None)  # a named window then spans the whole input
    kw.update(axis=axis, scaling=["density", "spectrum"][seed % 2], average=["mean", "median"][seed % 3 == 1],
              detrend=["constant", "linear", False][seed % 3], window=["hann", "blackman"][seed % 2],
              fs=[1.0, 10.0][seed % 2])
    for a, b in zip(ours.welch(x, **kw), theirs.welch(x, **kw)):
        _close(a, b)
    y = rng.normal(size=x.shape).astype(x.dtype)
    if seed % 3 == 2:  # y shorter along the axis: padded with zeros
        y = np.take(y, np.arange(x.shape[axis] - 5), axis=axis)
    for a, b in zip(ours.csd(x, y, **kw), theirs.csd(x, y, **kw)):
        _close(a, b)


@pytest.mark.parametrize("seed", range(10))
def test_istft_matches_jax_and_inverts_stft(seed):
    rng = np.random.default_rng(200 + seed)
    x, _ = _signal(rng, ndim=int(rng.integers(1, 3)))
    x = np.moveaxis(x, 0, -1) if x.ndim > 1 and x.shape[-1] < 24 else x
    nperseg = 2 * int(rng.integers(2, 17))  # odd lengths fail in JAX's inverse FFT (below)
    noverlap = [None, nperseg // 2, 3 * nperseg // 4][seed % 3]
    window = ["hann", "hamming"][seed % 2]
    _, _, Z = theirs.stft(x, nperseg=nperseg, noverlap=noverlap, window=window)
    Z = np.asarray(Z)
    kw = dict(nperseg=nperseg, noverlap=noverlap, window=window)
    t, back = ours.istft(Z, **kw)
    t_jax, back_jax = theirs.istft(Z, **kw)
    _close(t, t_jax)
    _close(back, back_jax, atol=1e-5)
    n = x.shape[-1]
    np.testing.assert_allclose(np.asarray(back)[..., :n], x, atol=1e-4)
    if Z.ndim == 3:  # time axis first: the result's time axis follows it
        moved = np.moveaxis(Z, -1, 0)
        _close(ours.istft(moved, time_axis=0, freq_axis=-1, **kw)[1],
               theirs.istft(moved, time_axis=0, freq_axis=-1, **kw)[1], atol=1e-5)


def test_jitted_and_differentiated_as_jax():
    rng = np.random.default_rng(7)
    x = rng.normal(size=64).astype(np.float32)

    def power(mod):
        return lambda v: mod.welch(v, nperseg=16)[1].sum()

    _close(meshsim.jit(power(ours))(x), jax.jit(power(theirs))(x))
    _close(meshsim.grad(power(ours))(x), jax.grad(power(theirs))(x), rtol=1e-4)


@pytest.mark.parametrize("call", [
    lambda m, x: m.stft(x, nperseg=0),
    lambda m, x: m.stft(x, nperseg=8, noverlap=8),
    lambda m, x: m.stft(x, nperseg=8, nfft=4),
    lambda m, x: m.stft(x, boundary="wrap"),
    lambda m, x: m.welch(x, nperseg=8, scaling="energy"),
    lambda m, x: m.welch(x, nperseg=8, average="max"),
    lambda m, x: m.csd(x[None], x[None, None], nperseg=8),
    lambda m, x: m.welch(x, window=np.ones((2, 4))),
    lambda m, x: m.istft(x),
    lambda m, x: m.istft(np.ones((5, 4), np.complex64), time_axis=0, freq_axis=0),
    lambda m, x: m.istft(np.ones((5, 4), np.complex64), nperseg=8, nfft=4),
    lambda m, x: m.istft(np.ones((11, 7), np.complex64), nperseg=21),
])
def test_errors_match_jax(call):
    x = np.random.default_rng(1).normal(size=40).astype(np.float32)
    with pytest.raises(Exception) as got:
        call(ours, x)
    with pytest.raises(Exception) as want:
        call(theirs, x)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
