"""Complex64/complex128 operands through jnp.linalg, lax.linalg and jax.scipy.linalg: values against
JAX 0.10.2 and by the decompositions' defining identities over random (batched) shapes, gradients
against JAX's (the transpose of its JVP, no conjugation) and finite differences, vmap, and eig's
VJP (eigenvalues; eigenvectors under enable_eigvec_derivs)."""
import zlib

import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp
import meshsim.scipy.linalg as msl
from x64_mode import x64

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402

COMPLEX = [np.complex64, np.complex128]


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def hermitian_pd(rng, batch, n, dtype):
    a = rand(rng, batch + (n, n), dtype)
    return (a @ ct(a) + n * np.eye(n)).astype(dtype)


def ct(x):
    return np.conj(np.swapaxes(x, -1, -2))


def tol(dtype):
    return 2e-4 if np.dtype(dtype) == np.complex64 else 1e-10


def close(ours, theirs, dtype, scale=10):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=tol(dtype) * scale, rtol=tol(dtype) * scale)


# name -> (operand maker, function of (numpy-like module, scipy.linalg-like module, x)); each
# output is unique (no sign or phase freedom), so it compares with JAX's directly.
def _cases():
    return {
        "cholesky": (lambda r, b, d: hermitian_pd(r, b, 4, d), lambda np_, sl, x: np_.linalg.cholesky(x)),
        "cholesky_upper": (lambda r, b, d: hermitian_pd(r, b, 3, d),
                           lambda np_, sl, x: np_.linalg.cholesky(x, upper=True)),
        "eigvalsh": (lambda r, b, d: hermitian_pd(r, b, 5, d), lambda np_, sl, x: np_.linalg.eigvalsh(x)),
        "svdvals": (lambda r, b, d: rand(r, b + (5, 3), d), lambda np_, sl, x: np_.linalg.svd(x, compute_uv=False)),
        "qr_r_abs": (lambda r, b, d: rand(r, b + (5, 3), d), lambda np_, sl, x: np_.abs(np_.linalg.qr(x)[1])),
        "solve": (lambda r, b, d: rand(r, b + (4, 4), d),
                  lambda np_, sl, x: np_.linalg.solve(x, np_.ones(x.shape[:-1] + (2,), x.dtype))),
        "inv": (lambda r, b, d: rand(r, b + (4, 4), d), lambda np_, sl, x: np_.linalg.inv(x)),
        "det": (lambda r, b, d: rand(r, b + (4, 4), d), lambda np_, sl, x: np_.linalg.det(x)),
        "slogdet": (lambda r, b, d: rand(r, b + (4, 4), d), lambda np_, sl, x: np_.stack(np_.linalg.slogdet(x))),
        "pinv": (lambda r, b, d: rand(r, b + (5, 3), d), lambda np_, sl, x: np_.linalg.pinv(x)),
        "norm_2": (lambda r, b, d: rand(r, b + (5, 3), d), lambda np_, sl, x: np_.linalg.norm(x, 2, axis=(-2, -1))),
        "norm_fro": (lambda r, b, d: rand(r, b + (5, 3), d), lambda np_, sl, x: np_.linalg.norm(x, axis=(-2, -1))),
        "norm_vector": (lambda r, b, d: rand(r, b + (6,), d), lambda np_, sl, x: np_.linalg.norm(x, axis=-1)),
        "cond": (lambda r, b, d: rand(r, b + (4, 4), d), lambda np_, sl, x: np_.linalg.cond(x)),
        "matrix_power": (lambda r, b, d: rand(r, b + (3, 3), d), lambda np_, sl, x: np_.linalg.matrix_power(x, -2)),
        "eigvals": (lambda r, b, d: rand(r, b + (4, 4), d), lambda np_, sl, x: np_.sort(np_.linalg.eigvals(x))),
        "lu_factor": (lambda r, b, d: rand(r, b + (4, 4), d), lambda np_, sl, x: sl.lu_factor(x)[0]),
        "lu_solve_h": (lambda r, b, d: rand(r, b + (4, 4), d),
                       lambda np_, sl, x: sl.lu_solve(sl.lu_factor(x), np_.ones(x.shape[:-1] + (2,), x.dtype), trans=2)),
        "cho_solve": (lambda r, b, d: hermitian_pd(r, b, 4, d),
                      lambda np_, sl, x: sl.cho_solve(sl.cho_factor(x), np_.ones(x.shape[:-1] + (2,), x.dtype))),
        "solve_pos": (lambda r, b, d: hermitian_pd(r, b, 4, d),
                      lambda np_, sl, x: sl.solve(x, np_.ones(x.shape[:-1] + (2,), x.dtype), assume_a="pos")),
        "solve_triangular_c": (lambda r, b, d: rand(r, b + (4, 4), d) + 4 * np.eye(4, dtype=d),
                               lambda np_, sl, x: sl.solve_triangular(x, np_.ones(x.shape[:-1] + (2,), x.dtype),
                                                                      trans="C", lower=True)),
        "expm": (lambda r, b, d: 0.5 * rand(r, b + (4, 4), d), lambda np_, sl, x: sl.expm(x)),
        "polar_p": (lambda r, b, d: rand(r, b + (3, 3), d), lambda np_, sl, x: sl.polar(x)[1]),
        "sqrtm": (lambda r, b, d: rand(r, (4, 4), d) + 4 * np.eye(4, dtype=d), lambda np_, sl, x: sl.sqrtm(x)),
    }


CASES = _cases()


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax(name, dtype):
    make, f = CASES[name]
    rng = rng_for(name + np.dtype(dtype).name)
    with x64(meshsim, jax):
        for batch in [(), (2,), (3, 1)][:1 if name == "sqrtm" else 3]:
            x = make(rng, batch, dtype)
            close(f(jnp, msl, x), f(jjnp, jsl, x), dtype, scale=50)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_decompositions_satisfy_their_identities(dtype):
    rng = rng_for("identities" + np.dtype(dtype).name)
    t = tol(dtype) * 50
    with x64(meshsim, jax):
        for batch in [(), (3,), (2, 2)]:
            h = hermitian_pd(rng, batch, 4, dtype)
            lo = np.asarray(jnp.linalg.cholesky(h))
            np.testing.assert_allclose(lo @ ct(lo), h, atol=t * 10)
            w, v = (np.asarray(o) for o in jnp.linalg.eigh(h))
            assert w.dtype == np.finfo(dtype).dtype
            np.testing.assert_allclose(h @ v, v * w[..., None, :], atol=t * 10)
            for shape in [(5, 3), (3, 5), (4, 4)]:
                a = rand(rng, batch + shape, dtype)
                q, r = (np.asarray(o) for o in jnp.linalg.qr(a))
                np.testing.assert_allclose(q @ r, a, atol=t)
                np.testing.assert_allclose(ct(q) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2),
                                           atol=t)
                u, s, vh = (np.asarray(o) for o in jnp.linalg.svd(a, full_matrices=False))
                assert s.dtype == np.finfo(dtype).dtype
                np.testing.assert_allclose((u * s[..., None, :]) @ vh, a, atol=t)
                p, lower, upper = (np.asarray(o) for o in msl.lu(a))
                np.testing.assert_allclose(p @ lower @ upper, a, atol=t)
            g = rand(rng, batch + (4, 4), dtype)
            w, v = (np.asarray(o) for o in jnp.linalg.eig(g))
            np.testing.assert_allclose(g @ v, v * w[..., None, :], atol=t * 10)


def _loss(outs, weights):
    """A real function of complex outputs, weighting real and imaginary parts differently."""
    return sum((o * w).real.sum() + 0.3 * (o * w).imag.sum() for o, w in zip(outs, weights))


def _grad_cases(lax_linalg, np_, sl):
    return {
        "cholesky": lambda x: [np_.linalg.cholesky(x)],
        "qr": lambda x: list(np_.linalg.qr(x)),
        "svd_s": lambda x: [np_.linalg.svd(x, compute_uv=False)],
        "svd_u_abs": lambda x: [np_.abs(np_.linalg.svd(x, full_matrices=False)[0])],
        "svd_vh_abs": lambda x: [np_.abs(np_.linalg.svd(x, full_matrices=False)[2])],
        "eigh": lambda x: [np_.linalg.eigvalsh(x), np_.abs(np_.linalg.eigh(x)[1])],
        "solve": lambda x: [np_.linalg.solve(x, np_.ones((x.shape[0], 2), x.dtype))],
        "inv": lambda x: [np_.linalg.inv(x)],
        "det": lambda x: [np_.linalg.det(x)],
        "slogdet": lambda x: [np_.linalg.slogdet(x)[1]],
        "pinv": lambda x: [np_.linalg.pinv(x)],
        "lu": lambda x: [lax_linalg.lu(x)[0]],
        "triangular_solve": lambda x: [lax_linalg.triangular_solve(x, np_.ones((3, x.shape[0]), x.dtype), lower=True,
                                                                   transpose_a=True, conjugate_a=True)],
        "cho_solve": lambda x: [sl.cho_solve(sl.cho_factor(x), np_.ones((x.shape[0], 2), x.dtype))],
        "eigvals": lambda x: [np_.sort(np_.linalg.eigvals(x))],
        "eig_vectors": lambda x: list(lax_linalg.eig(x, compute_left_eigenvectors=False, enable_eigvec_derivs=True)),
        "eig_left_vectors": lambda x: list(lax_linalg.eig(x, compute_right_eigenvectors=False,
                                                          enable_eigvec_derivs=True)),
        "eig_both_vectors": lambda x: list(lax_linalg.eig(x, enable_eigvec_derivs=True)),
        "expm": lambda x: [sl.expm(x)],
    }


GRAD_OPERANDS = {"cholesky": "pd", "eigh": "pd", "cho_solve": "pd", "qr": "tall", "svd_s": "tall",
                 "svd_u_abs": "tall", "svd_vh_abs": "tall", "pinv": "tall", "triangular_solve": "shifted"}


@pytest.mark.parametrize("real_operand", [False, True])
@pytest.mark.parametrize("name", sorted(_grad_cases(None, None, None)))
def test_gradients_match_jax(name, real_operand):
    ours = _grad_cases(meshsim.lax.linalg, jnp, msl)[name]
    theirs = _grad_cases(jax.lax.linalg, jjnp, jsl)[name]
    rng = rng_for("grad" + name + str(real_operand))
    with x64(meshsim, jax):
        kind = GRAD_OPERANDS.get(name, "square")
        x = {"pd": lambda: hermitian_pd(rng, (), 4, np.complex128), "tall": lambda: rand(rng, (5, 3), np.complex128),
             "shifted": lambda: rand(rng, (4, 4), np.complex128) + 4 * np.eye(4),
             "square": lambda: rand(rng, (4, 4), np.complex128)}[kind]()
        if name == "expm":
            x = 0.3 * x
        if real_operand:
            if kind == "pd":
                x = (x.real @ x.real.T + 4 * np.eye(4))
            else:
                x = np.ascontiguousarray(x.real)
        weights = [rand(rng, np.shape(o), np.complex128) for o in theirs(x)]
        g_theirs = np.asarray(jax.grad(lambda v: _loss(theirs(v), weights))(x))
        g_ours = np.asarray(meshsim.grad(lambda v: _loss(ours(v), weights))(x))
        assert g_ours.dtype == g_theirs.dtype
        np.testing.assert_allclose(g_ours, g_theirs, atol=1e-8, rtol=1e-7)
        # and the finite difference of the loss along a random direction of the operand's space
        direction = rand(rng, x.shape, np.complex128)
        direction = direction.real if real_operand else direction
        if kind == "pd":  # stay Hermitian where the function reads one triangle
            direction = (direction + ct(direction)) / 2
        h = 1e-6
        loss = lambda v: float(_loss(ours(v), weights))  # noqa: E731
        numeric = (loss(x + h * direction) - loss(x - h * direction)) / (2 * h)
        # JAX's gradient of a real function of z is dL/dRe z - i dL/dIm z.
        analytic = np.sum((g_ours * direction).real)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6)


def test_complex64_gradients_match_jax():
    rng = rng_for("grad64")
    x = rand(rng, (4, 4), np.complex64) + 3 * np.eye(4, dtype=np.complex64)
    weights = [rand(rng, (4, 4), np.complex64)]
    for f_ours, f_theirs in [(jnp.linalg.inv, jjnp.linalg.inv),
                             (lambda v: jnp.linalg.qr(v)[1], lambda v: jjnp.linalg.qr(v)[1])]:
        g_ours = meshsim.grad(lambda v: _loss([f_ours(v)], weights))(x)
        g_theirs = jax.grad(lambda v: _loss([f_theirs(v)], weights))(x)
        assert np.asarray(g_ours).dtype == np.complex64
        np.testing.assert_allclose(np.asarray(g_ours), np.asarray(g_theirs), atol=1e-4, rtol=1e-4)


def test_vmap_and_jit_of_complex_decompositions():
    rng = rng_for("vmap")
    x = hermitian_pd(rng, (3,), 4, np.complex64)
    eager = np.asarray(jnp.linalg.cholesky(x))
    np.testing.assert_allclose(np.asarray(meshsim.vmap(jnp.linalg.cholesky)(x)), eager, atol=1e-5)
    np.testing.assert_allclose(np.asarray(meshsim.jit(jnp.linalg.cholesky)(x)), eager, atol=1e-5)
    s = np.asarray(meshsim.vmap(lambda m: jnp.linalg.svd(m, compute_uv=False))(x))
    np.testing.assert_allclose(s, np.asarray(jjnp.linalg.svd(x, compute_uv=False)), atol=1e-4)


def test_eigenvector_derivatives_need_the_opt_in_as_in_jax():
    x = rand(rng_for("eig-opt-in"), (3, 3), np.complex64)
    with pytest.raises(NotImplementedError) as theirs:
        jax.grad(lambda v: jjnp.linalg.eig(v)[1].real.sum())(x)
    with pytest.raises(NotImplementedError) as ours:
        meshsim.grad(lambda v: jnp.linalg.eig(v)[1].real.sum())(x)
    assert str(ours.value) == str(theirs.value)


def test_dtype_errors():
    with pytest.raises(TypeError, match="cholesky requires a floating-point or complex operand, got int32"):
        meshsim.lax.linalg.cholesky(np.eye(2, dtype=np.int32), symmetrize_input=False)
