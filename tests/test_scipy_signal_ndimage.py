"""jax.scipy.signal.detrend and jax.scipy.ndimage.map_coordinates against JAX 0.10.2: linear,
constant and breakpoint detrending; nearest and linear sampling in every boundary mode,
including out-of-bounds coordinates and integer images."""
import importlib

import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(0)
DATA = RNG.normal(size=(4, 30)).astype(np.float32) + np.arange(30, dtype=np.float32)
IMG = RNG.normal(size=(5, 6)).astype(np.float32)
COORDS = [RNG.uniform(-2, 7, 25).astype(np.float32), RNG.uniform(-2, 8, 25).astype(np.float32)]


def _both(real_jax, fn):
    outs = []
    for jax in (meshsim, real_jax):
        outs.append(fn(importlib.import_module(jax.__name__ + ".scipy.signal"),
                       importlib.import_module(jax.__name__ + ".scipy.ndimage")))
    return outs


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kwargs", [{}, {"type": "constant", "axis": 0}, {"bp": [10, 20]}, {"axis": 0}])
def test_detrend(real_jax, kwargs):
    _close(*_both(real_jax, lambda sig, nd: sig.detrend(DATA, **kwargs)))


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
def test_map_coordinates(real_jax, order, mode):
    _close(*_both(real_jax, lambda sig, nd: nd.map_coordinates(IMG, COORDS, order, mode=mode, cval=-1.5)))


def test_map_coordinates_integer_image_and_jit(real_jax):
    img = np.arange(20).reshape(4, 5)
    _close(*_both(real_jax, lambda sig, nd: nd.map_coordinates(img, COORDS, 1, mode="nearest")))
    ours = meshsim.jit(lambda c: importlib.import_module("meshsim.scipy.ndimage").map_coordinates(
        IMG, c, 1))(COORDS)
    _close(ours, importlib.import_module("jax.scipy.ndimage").map_coordinates(IMG, COORDS, 1))


def test_map_coordinates_errors():
    nd = importlib.import_module("meshsim.scipy.ndimage")
    with pytest.raises(NotImplementedError, match="order<=1"):
        nd.map_coordinates(IMG, COORDS, 3)
    with pytest.raises(ValueError, match="length input.ndim"):
        nd.map_coordinates(IMG, COORDS[:1], 1)
