"""jnp.roots, jnp.sort_complex and jnp.fromfile against JAX 0.10.2: roots of random real and
complex polynomials (with leading zeros stripped, or kept under jit as NaN roots), checked as
JAX's and by the polynomial vanishing at them; sort_complex on random dtypes; fromfile's error."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp


def _by_value(r):
    r = np.asarray(r)
    return r[np.lexsort((np.round(r.imag, 3), np.round(r.real, 3)))]


@pytest.mark.parametrize("seed", range(6))
def test_roots_match_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    degree, zeros = int(rng.integers(1, 7)), int(rng.integers(0, 3))
    p = rng.standard_normal(degree + 1).astype(np.float32)
    if seed % 3 == 2:
        p = (p + 1j * rng.standard_normal(degree + 1)).astype(np.complex64)
    p = np.concatenate([np.zeros(zeros, p.dtype), p])
    got, want = mnp.roots(p), real_jax.numpy.roots(p)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(_by_value(got), _by_value(want), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(np.polyval(p.astype(np.complex128), np.asarray(got)), 0, atol=5e-2 * np.abs(p).max())
    kept = meshsim.jit(lambda q: mnp.roots(q, strip_zeros=False))(p)
    kept_jax = real_jax.jit(lambda q: real_jax.numpy.roots(q, strip_zeros=False))(p)
    assert kept.shape == kept_jax.shape
    assert np.isnan(np.asarray(kept)).sum() == np.isnan(np.asarray(kept_jax)).sum() == zeros
    np.testing.assert_allclose(_by_value(np.asarray(kept)[:degree]), _by_value(np.asarray(kept_jax)[:degree]),
                               rtol=2e-3, atol=2e-3)


def test_roots_edge_cases_and_errors(real_jax):
    for p in ([], [2.0], [0.0, 0.0], np.zeros((2, 2), np.float32)):
        outcomes = []
        for J in (meshsim, real_jax):
            try:
                r = J.numpy.roots(np.asarray(p, np.float32))
                outcomes.append((r.shape, r.dtype))
            except Exception as e:  # noqa: BLE001 - compared with JAX's
                outcomes.append((type(e), str(e)))
        assert outcomes[0] == outcomes[1]
    for J in (meshsim, real_jax):
        with pytest.raises(J.errors.ConcretizationTypeError, match="pass strip_zeros=False"):
            J.jit(J.numpy.roots)(np.ones(3, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64, np.bool_, np.float16])
def test_sort_complex_matches_jax(real_jax, dtype):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((3, 5)) * 3).astype(dtype)
    if dtype == np.complex64:
        a = (a + 1j * np.round(rng.standard_normal((3, 5)))).astype(dtype)
        a[0, :2] = a[0, 2]  # ties in the real part order by the imaginary part
    got, want = mnp.sort_complex(a), real_jax.numpy.sort_complex(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    jitted = meshsim.jit(mnp.sort_complex)(a)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(want))


def test_fromfile_refuses_as_jax(real_jax, tmp_path):
    path = tmp_path / "x.bin"
    np.arange(3, dtype=np.float32).tofile(path)
    messages = []
    for J in (meshsim, real_jax):
        with pytest.raises(NotImplementedError) as info:
            J.numpy.fromfile(path, dtype=np.float32)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
