"""lax.linalg.eig / jnp.linalg.eig and eigvals against real JAX on CPU: complex
eigenvalues and unit-norm eigenvectors of general real and complex matrices,
stacks, left eigenvectors, and NaNs for non-finite input."""
import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim import lax as mlax

jax = pytest.importorskip("jax")
jnp = jax.numpy


def matrices(shape, dtype, seed):
    r = np.random.default_rng(seed)
    a = r.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * r.standard_normal(shape)
    return a.astype(dtype)


def sorted_values(w):
    w = np.asarray(w)
    return np.take_along_axis(w, np.lexsort((w.imag.round(3), w.real.round(3)), axis=-1), axis=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (7, 7), (3, 5, 5), (2, 2, 6, 6)])
def test_eig_matches_jax(dtype, shape):
    a = matrices(shape, dtype, sum(shape))
    w, v = mnp.linalg.eig(mnp.asarray(a))
    jw, jv = jnp.linalg.eig(jnp.asarray(a))
    assert w.dtype == jw.dtype == np.complex64 and v.dtype == jv.dtype and v.shape == jv.shape
    tol = 1e-4 * max(1.0, float(np.abs(a).max())) * shape[-1]
    np.testing.assert_allclose(sorted_values(w), sorted_values(jw), atol=tol, rtol=1e-4)
    a64, v64, w64 = a.astype(np.complex128), np.asarray(v, np.complex128), np.asarray(w, np.complex128)
    residual = a64 @ v64 - v64 * w64[..., None, :]
    assert np.abs(residual).max() <= tol
    np.testing.assert_allclose(np.linalg.norm(v64, axis=-2), 1.0, atol=1e-5)
    np.testing.assert_allclose(sorted_values(mnp.linalg.eigvals(mnp.asarray(a))), sorted_values(jw),
                               atol=tol, rtol=1e-4)


def test_left_eigenvectors_and_params():
    a = matrices((5, 5), np.float32, 3)
    w, vl, vr = mlax.linalg.eig(mnp.asarray(a))
    jw = jax.lax.linalg.eig(jnp.asarray(a))[0]
    np.testing.assert_allclose(sorted_values(w), sorted_values(jw), atol=1e-4, rtol=1e-4)
    a64 = a.astype(np.complex128)
    vl64, w64 = np.asarray(vl, np.complex128), np.asarray(w, np.complex128)
    assert np.abs(vl64.conj().T @ a64 - w64[:, None] * vl64.conj().T).max() < 1e-4
    only_w = mlax.linalg.eig(mnp.asarray(a), compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    assert len(only_w) == 1
    with pytest.raises(ValueError, match="must have shape"):
        mlax.linalg.eig(mnp.zeros((3, 4)))


def test_non_finite_input_gives_nans_as_jax():
    a = np.full((3, 3), np.nan, np.float32)
    w, v = mnp.linalg.eig(mnp.asarray(a))
    jw, jv = jnp.linalg.eig(jnp.asarray(a))
    assert np.isnan(np.asarray(w)).all() == np.isnan(np.asarray(jw)).all()
    assert np.isnan(np.asarray(v)).all() == np.isnan(np.asarray(jv)).all()


def test_eig_under_x64_vmap_and_jit():
    a = matrices((3, 4, 4), np.float64, 11)
    with jax.enable_x64(True), ms.enable_x64(True):
        w = ms.vmap(mnp.linalg.eigvals)(mnp.asarray(a))
        jw = jax.vmap(jnp.linalg.eigvals)(jnp.asarray(a))
        assert w.dtype == jw.dtype == np.complex128
        np.testing.assert_allclose(sorted_values(w), sorted_values(jw), atol=1e-10, rtol=1e-10)
    w32 = ms.jit(mnp.linalg.eigvals)(mnp.asarray(a.astype(np.float32)))
    np.testing.assert_allclose(sorted_values(w32), sorted_values(jw), atol=1e-4, rtol=1e-4)
