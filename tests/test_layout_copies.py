"""Laying out a transpose gives NumPy's and JAX's values for every element
width: through the strided copy's tiled case (the last two dims a transposed
pair whose source rows are a multiple of 2 KiB apart; `W` below is that many
bytes of elements) with blocks that are not a whole number of tiles, batched
blocks, strided, offset and reversed views, blocks too thin to tile, and
through the element walk."""
import ml_dtypes
import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax

RNG = np.random.default_rng(7)

DTYPES = [np.uint8, np.int8, ml_dtypes.int4, np.int16, ml_dtypes.bfloat16, np.float16, np.float32,
          np.int32, np.complex64, np.float64, np.int64, np.complex128, np.bool_]

CASES = [
    ((37, "W"), (1, 0)),
    (("W", 50), (1, 0)),
    ((3, 21, "W"), (0, 2, 1)),
    ((2, 3, 19, "2W"), (1, 0, 3, 2)),
    ((9, "W"), (1, 0)),
    ((17, 33), (1, 0)),
    ((64, 64), (1, 0)),
    ((130, 97), (1, 0)),
    ((3, 70, 90), (0, 2, 1)),
    ((70, 90, 3), (1, 0, 2)),
    ((5, 40, 300), (2, 1, 0)),
    ((2, 3, 40, 50), (1, 0, 3, 2)),
    ((1, 16), (1, 0)),
    ((400, 2), (1, 0)),
    ((16, 200), (1, 0)),
]


def _values(shape, dtype):
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype == ml_dtypes.int4:
        return RNG.integers(-8, 8, shape).astype(dtype)
    x = RNG.standard_normal(shape) * 50
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _sized(shape, dtype):
    w = 2048 // np.dtype(dtype).itemsize
    return tuple(w if d == "W" else 2 * w if d == "2W" else d for d in shape)


pytestmark = pytest.mark.usefixtures("x64")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,perm", CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_transpose_laid_out_matches_numpy(shape, perm, dtype):
    x = _values(_sized(shape, dtype), dtype)
    got = np.asarray(jax.jit(lambda a: lax.copy(lax.transpose(a, perm)))(x))
    want = np.ascontiguousarray(x.transpose(perm))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.complex64, np.int16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("view", ["step", "reversed", "offset", "rows"])
def test_transposed_views_match_jax(view, dtype, real_jax):
    x = _values(_sized((6, 90, "W"), dtype), dtype)

    def f(m, a):
        if view == "step":
            a = a[:, 1::2, ::3]
        elif view == "reversed":
            a = a[:, ::-1, :]
        elif view == "offset":
            a = a[2:5, 3:80, 5:66]
        else:  # the same row stride, every other row
            a = a[:, ::2, :]
        return m.swapaxes(a, 1, 2) * 1

    got = np.asarray(jax.jit(lambda a: f(jnp, a))(x))
    want = np.asarray(real_jax.jit(lambda a: f(real_jax.numpy, a))(x))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
