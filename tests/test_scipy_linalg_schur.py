"""The Schur/Hessenberg part of jax.scipy.linalg and lax.linalg (schur, hessenberg,
householder_product, sqrtm, rsf2csf, funm, solve_sylvester, expm_frechet, qr_multiply,
eigh_tridiagonal, dft) against JAX 0.10.2 and by their defining identities, over random shapes
and the four LAPACK dtypes; vmap, jit and errors."""

import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp
import meshsim.scipy.linalg as msl
from x64_mode import x64

jax = pytest.importorskip("jax")
import jax.scipy.linalg as jsl  # noqa: E402

RNG = np.random.default_rng(23)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def rand(shape, dtype):
    x = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def tol(dtype):
    return 2e-4 if np.dtype(dtype).itemsize in (4, 8) and np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


def ct(x):
    return np.conj(np.swapaxes(x, -1, -2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_schur_is_a_unitary_similarity_to_quasi_triangular_form(dtype):
    with x64(meshsim, jax):
        for shape in [(1, 1), (4, 4), (2, 3, 6, 6), (0, 0)]:
            a = rand(shape, dtype)
            t, z = (np.asarray(v) for v in msl.schur(a))
            assert t.dtype == z.dtype == dtype and t.shape == z.shape == shape
            n = shape[-1]
            np.testing.assert_allclose(z @ t @ ct(z), a, atol=tol(dtype) * 10 * max(n, 1))
            np.testing.assert_allclose(ct(z) @ z, np.broadcast_to(np.eye(n), shape), atol=tol(dtype) * 10)
            below = 2 if np.isrealobj(a) else 1  # real form keeps 2x2 blocks on the subdiagonal
            assert np.all(np.tril(t, -below) == 0)
            if n:  # LAPACK's gees in both libraries: the same T up to the Schur vectors' phases
                theirs = np.asarray(jsl.schur(a)[0])
                np.testing.assert_allclose(np.diagonal(t, 0, -2, -1), np.diagonal(theirs, 0, -2, -1),
                                           atol=tol(dtype) * 50 * n)
                np.testing.assert_allclose(np.abs(t), np.abs(theirs), atol=tol(dtype) * 50 * n)


def test_schur_complex_output_and_lax_form_match_jax():
    a = rand((5, 5), np.float32)
    ours, theirs = msl.schur(a, output="complex"), jsl.schur(a, output="complex")
    assert [np.asarray(v).dtype for v in ours] == [np.asarray(v).dtype for v in theirs] == [np.complex64] * 2
    np.testing.assert_allclose(np.asarray(ours[0]), np.asarray(theirs[0]), atol=1e-4)
    only_t = meshsim.lax.linalg.schur(a, compute_schur_vectors=False)
    assert isinstance(only_t, list) and len(only_t) == 1
    np.testing.assert_allclose(np.asarray(only_t[0]), np.asarray(ours[0].real if False else msl.schur(a)[0]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_hessenberg_matches_jax_and_its_identity(dtype):
    with x64(meshsim, jax):
        for shape in [(5, 5), (3, 4, 4), (1, 1), (0, 0)]:
            a = rand(shape, dtype)
            h, q = (np.asarray(v) for v in msl.hessenberg(a, calc_q=True))
            jh, jq = jsl.hessenberg(a, calc_q=True)
            np.testing.assert_allclose(h, np.asarray(jh), atol=tol(dtype) * 10)
            np.testing.assert_allclose(q, np.asarray(jq), atol=tol(dtype) * 10)
            assert h.dtype == dtype
            if shape[-1]:
                np.testing.assert_allclose(q @ h @ ct(q), a, atol=tol(dtype) * 20)
                assert np.all(np.tril(h, -2) == 0)
            np.testing.assert_allclose(np.asarray(msl.hessenberg(a)), h)


@pytest.mark.parametrize("dtype", DTYPES)
def test_householder_product_matches_jax(dtype):
    with x64(meshsim, jax):
        a, taus = rand((2, 6, 4), dtype), rand((2, 3), dtype)
        np.testing.assert_allclose(np.asarray(meshsim.lax.linalg.householder_product(a, taus)),
                                   np.asarray(jax.lax.linalg.householder_product(a, taus)), atol=tol(dtype) * 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sqrtm_squares_back_and_matches_jax(dtype):
    with x64(meshsim, jax):
        for n in (1, 3, 6):
            a = rand((n, n), dtype) + n * np.eye(n, dtype=dtype)
            ours = np.asarray(msl.sqrtm(a))
            np.testing.assert_allclose(ours @ ours, a, atol=tol(dtype) * 50 * n)
            np.testing.assert_allclose(ours, np.asarray(jsl.sqrtm(a)), atol=tol(dtype) * 50 * n)
    with pytest.raises(NotImplementedError, match="Blocked version is not implemented yet."):
        msl.sqrtm(np.eye(2, dtype=np.float32), blocksize=2)


def test_rsf2csf_gives_the_complex_schur_form_of_jax():
    a = np.array([[0., 3., 3.], [0., 1., 2.], [2., 0., 1.]], np.float32)
    for m in (a, rand((3, 5, 5), np.float32)):
        t, z = msl.schur(m)
        tc, zc = (np.asarray(v) for v in msl.rsf2csf(t, z))
        jt, jz = jsl.rsf2csf(*jsl.schur(m))
        assert tc.dtype == np.complex64
        np.testing.assert_allclose(zc @ tc @ ct(zc), m, atol=1e-4)
        assert np.allclose(np.tril(tc, -1), 0)
        np.testing.assert_allclose(tc, np.asarray(jt), atol=1e-4)
        np.testing.assert_allclose(zc, np.asarray(jz), atol=1e-4)
    with pytest.raises(ValueError, match="Input 'T' must be square."):
        msl.rsf2csf(np.zeros((2, 3)), np.zeros((3, 3)))


@pytest.mark.parametrize("func", ["exp", "sin", "square"])
def test_funm_matches_jax_and_closed_forms(func):
    a = rand((4, 4), np.float32)
    ours = msl.funm(a, getattr(jnp, func))
    theirs = jsl.funm(a, getattr(jax.numpy, func))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-3, atol=1e-3)
    if func == "square":
        np.testing.assert_allclose(np.asarray(ours), a @ a, atol=1e-3)
    if func == "exp":
        np.testing.assert_allclose(np.asarray(ours).real, np.asarray(msl.expm(a)), atol=1e-3)
    f, err = msl.funm(a, getattr(jnp, func), disp=False)
    jf, jerr = jsl.funm(a, getattr(jax.numpy, func), disp=False)
    np.testing.assert_allclose(float(err), float(jerr), rtol=1e-2)


@pytest.mark.parametrize("method", ["schur", "eigen"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_sylvester_solves_and_matches_jax(method, dtype):
    with x64(meshsim, jax):
        m, n = 4, 3
        a = rand((2, m, m), dtype) + 3 * np.eye(m, dtype=dtype)
        b = rand((n, n), dtype) + 3 * np.eye(n, dtype=dtype)
        c = rand((2, m, n), dtype)
        x = np.asarray(msl.solve_sylvester(a, b, c, method=method))
        assert x.dtype == dtype and x.shape == (2, m, n)
        np.testing.assert_allclose(a @ x + x @ b, c, atol=tol(dtype) * 100)
        np.testing.assert_allclose(x, np.asarray(jsl.solve_sylvester(a, b, c, method=method)), atol=tol(dtype) * 100)
    singular = msl.solve_sylvester(np.eye(2, dtype=np.float32), -np.eye(2, dtype=np.float32),
                                   np.ones((2, 2), np.float32))
    assert np.all(np.isnan(np.asarray(singular)))
    with pytest.raises(ValueError, match="Incompatible shapes for Sylvester equation"):
        msl.solve_sylvester(np.eye(2), np.eye(3), np.ones((3, 3)))


def test_expm_frechet_matches_jax_and_finite_differences():
    with x64(meshsim, jax):
        a, e = rand((2, 4, 4), np.float64), rand((2, 4, 4), np.float64)
        expm_a, d = msl.expm_frechet(a, e)
        j_expm, jd = jsl.expm_frechet(a, e)
        np.testing.assert_allclose(np.asarray(expm_a), np.asarray(j_expm), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(d), np.asarray(jd), rtol=1e-9, atol=1e-12)
        h = 1e-6
        numeric = (np.asarray(msl.expm(a + h * e)) - np.asarray(msl.expm(a - h * e))) / (2 * h)
        np.testing.assert_allclose(np.asarray(d), numeric, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(np.asarray(msl.expm_frechet(a, e, compute_expm=False)), np.asarray(d))
    with pytest.raises(ValueError, match="expected A and E to be the same shape"):
        msl.expm_frechet(np.eye(3), np.eye(2))


@pytest.mark.parametrize("mode", ["right", "left"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_qr_multiply_matches_jax(mode, shape):
    a = rand(shape, np.float32)
    m, n = shape
    k = min(m, n)
    for c in (rand((2, m) if mode == "right" else (k, 2), np.float32),
              rand((m,) if mode == "right" else (k,), np.float32)):
        for conjugate in (False, True):
            ours = msl.qr_multiply(a, c, mode=mode, conjugate=conjugate)
            theirs = jsl.qr_multiply(a, c, mode=mode, conjugate=conjugate)
            for o, t in zip(ours, theirs):
                o, t = np.asarray(o), np.asarray(t)
                assert o.shape == t.shape and o.dtype == t.dtype
                np.testing.assert_allclose(np.abs(o), np.abs(t), atol=1e-4)  # Q's column signs agree
                np.testing.assert_allclose(o, t, atol=1e-4)
    with pytest.raises(ValueError, match="mode must be 'right' or 'left'"):
        msl.qr_multiply(a, a, mode="up")


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_tridiagonal_matches_jax_and_diagonalises(dtype):
    with x64(meshsim, jax):
        n = 7
        d = rand((n,), dtype)
        d = d.real.astype(dtype) if np.iscomplexobj(d) else d
        e = rand((n - 1,), dtype)
        values = np.asarray(msl.eigh_tridiagonal(d, e, eigvals_only=True))
        theirs = np.asarray(jsl.eigh_tridiagonal(d, e, eigvals_only=True))
        assert values.dtype == theirs.dtype
        np.testing.assert_allclose(values, theirs, atol=tol(dtype) * 20)
        w, v = (np.asarray(x) for x in msl.eigh_tridiagonal(d, e))
        dense = np.diag(d) + np.diag(e, -1) + np.diag(np.conj(e), 1)
        np.testing.assert_allclose(dense @ v, v * w, atol=tol(dtype) * 50)
        sub = np.asarray(msl.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(2, 4)))
        np.testing.assert_allclose(sub, theirs[2:5], atol=tol(dtype) * 20)
    with pytest.raises(NotImplementedError, match="select='v'"):
        msl.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), eigvals_only=True, select="v",
                             select_range=(0, 1))
    with x64(meshsim, jax), pytest.raises(TypeError, match="must have same dtype"):
        msl.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float64))


@pytest.mark.parametrize("scale", [None, "sqrtn", "n"])
def test_dft_matches_jax(scale):
    for n in (1, 4, 7):
        ours, theirs = msl.dft(n, scale), jsl.dft(n, scale)
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype
        # JAX's jitted dft divides the phase by n as a multiplication by 1/n: phases up to
        # 2 pi (n - 1)^2 / n then differ in their last float32 bit.
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), atol=4 * n * np.finfo(np.float32).eps)
    x = rand((6,), np.float32)
    np.testing.assert_allclose(np.asarray(msl.dft(6)) @ x, np.fft.fft(x), atol=1e-5)
    with pytest.raises(ValueError, match="scale must be None, 'sqrtn', or 'n'"):
        msl.dft(3, "half")
    with pytest.raises(ValueError, match="dtype must be a complex floating-point type"):
        msl.dft(3, dtype=np.float32)


def test_jit_and_vmap():
    a = rand((3, 4, 4), np.float32) + 4 * np.eye(4, dtype=np.float32)
    eager = np.asarray(msl.schur(a)[0])
    np.testing.assert_allclose(np.asarray(meshsim.jit(lambda x: msl.schur(x)[0])(a)), eager)
    np.testing.assert_allclose(np.asarray(meshsim.vmap(lambda x: msl.schur(x)[0])(a)), eager)
    roots = meshsim.vmap(msl.sqrtm)(a)
    np.testing.assert_allclose(np.asarray(roots), np.stack([np.asarray(msl.sqrtm(m)) for m in a]), atol=1e-5)
    h = meshsim.jit(lambda x: msl.hessenberg(x, calc_q=True))(a)
    np.testing.assert_allclose(np.asarray(h[0]), np.asarray(msl.hessenberg(a)), atol=1e-6)


def test_shape_and_dtype_errors_match_jax():
    for make in (lambda m: m.schur(np.zeros((2, 3), np.float32)),
                 lambda m: m.hessenberg(np.zeros((2, 3), np.float32))):
        with pytest.raises(ValueError) as theirs:
            make(jsl)
        with pytest.raises(ValueError) as ours:
            make(msl)
        assert str(ours.value) == str(theirs.value)
