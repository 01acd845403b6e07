"""jax.image.resize and scale_and_translate against real JAX: every method,
up- and downsampling with and without antialiasing, translations, dtypes,
gradients, jit, and JAX's errors."""
import numpy as np
import pytest

import meshsim
from outcomes import outcome

jax = pytest.importorskip("jax")

METHODS = ["nearest", "linear", "cubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_resize_matches_jax(method, antialias, seed):
    rng = np.random.default_rng(seed)
    shape = (2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), 3)
    out = (2, int(rng.integers(1, 13)), int(rng.integers(1, 13)), 3)
    x = rng.standard_normal(shape).astype(np.float32)
    expected = jax.image.resize(x, out, method, antialias=antialias)
    got = meshsim.image.resize(x, out, method, antialias=antialias)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", METHODS[1:])
def test_scale_and_translate_matches_jax(method):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 6, 2)).astype(np.float32)
    for scale, translation, antialias in [((1.7, 0.6), (0.3, -1.2), True), ((0.5, 2.0), (1.0, 0.0), False)]:
        args = ((9, 4, 2), (0, 1), np.array(scale, np.float32), np.array(translation, np.float32), method)
        expected = jax.image.scale_and_translate(x, *args, antialias=antialias)
        got = meshsim.image.scale_and_translate(x, *args, antialias=antialias)
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, "bfloat16", np.float16])
def test_resize_dtypes_match_jax(dtype):
    x = np.random.default_rng(2).integers(0, 200, (6, 5)).astype(meshsim.numpy.dtype(dtype))
    for method in ("nearest", "linear"):
        expected = jax.image.resize(x, (9, 3), method)
        got = meshsim.image.resize(x, (9, 3), method)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(expected, np.float64), rtol=1e-2)


def test_resize_gradient_and_jit_match_jax():
    x = np.random.default_rng(3).standard_normal((4, 7)).astype(np.float32)

    def f(lib):
        return lib.jit(lib.grad(lambda a: (lib.image.resize(a, (9, 3), "cubic") ** 2).sum()))

    np.testing.assert_allclose(np.asarray(f(meshsim)(x)), np.asarray(f(jax)(x)), rtol=1e-5, atol=1e-5)


ERRORS = {
    "rank": lambda lib, x: lib.image.resize(x, (3,), "linear"),
    "method": lambda lib, x: lib.image.resize(x, (3, 3), "spline"),
    "nearest_translate": lambda lib, x: lib.image.scale_and_translate(x, (3, 3), (0, 1), np.ones(2), np.zeros(2),
                                                                      "nearest"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_jax(case):
    x = np.ones((4, 4), np.float32)

    expected = outcome(ERRORS[case], jax, x)
    assert expected[0] != "ok" and outcome(ERRORS[case], meshsim, x) == expected
