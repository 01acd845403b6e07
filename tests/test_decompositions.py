"""Matrix decompositions (lax.linalg, numpy.linalg): values by their defining
identities and against real JAX, gradients against JAX and finite
differences, vmap, jit, and JAX's errors."""
import numpy as np
import pytest

import meshsim
from x64_mode import x64
import meshsim.numpy as jnp
from meshsim import lax

jax = pytest.importorskip("jax")
jjnp = jax.numpy

RNG = np.random.default_rng(0)


def spd(n, batch=(), dtype=np.float32):
    x = RNG.standard_normal(batch + (n, n))
    return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(dtype)


def general(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch,n", [((), 1), ((), 5), ((3,), 4), ((2, 2), 3), ((), 0)])
def test_cholesky_reconstructs_and_matches_jax(dtype, batch, n):
    with x64(meshsim, jax, enabled=dtype == np.float64):
        a = spd(n, batch, dtype)
        L = np.asarray(jnp.linalg.cholesky(a))
        assert L.dtype == dtype and L.shape == a.shape
        np.testing.assert_allclose(L @ np.swapaxes(L, -1, -2), a, **tol(dtype))
        assert np.all(np.triu(L, 1) == 0)
        np.testing.assert_allclose(L, np.asarray(jjnp.linalg.cholesky(a)), **tol(dtype))
        U = np.asarray(jnp.linalg.cholesky(a, upper=True))
        np.testing.assert_allclose(U, np.swapaxes(L, -1, -2))


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan_as_in_jax():
    a = np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)
    ours, theirs = np.asarray(jnp.linalg.cholesky(a)), np.asarray(jjnp.linalg.cholesky(a))
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 4), (1, 1)])
def test_lu_matches_jax_and_reconstructs(shape):
    a = general(shape)
    lu, piv, perm = (np.asarray(v) for v in lax.linalg.lu(a))
    jlu, jpiv, jperm = (np.asarray(v) for v in jax.lax.linalg.lu(a))
    np.testing.assert_array_equal(piv, jpiv)
    np.testing.assert_array_equal(perm, jperm)
    np.testing.assert_allclose(lu, jlu, rtol=1e-4, atol=1e-5)
    m, n = shape[-2:]
    k = min(m, n)
    L = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    U = np.triu(lu[..., :k, :])
    np.testing.assert_allclose(L @ U, np.take_along_axis(a, perm[..., None], axis=-2), rtol=1e-4, atol=1e-5)
    assert piv.dtype == np.int32 and perm.dtype == np.int32


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 2)])
def test_qr_matches_jax(mode, shape):
    a = general(shape)
    ours, theirs = jnp.linalg.qr(a, mode=mode), jjnp.linalg.qr(a, mode=mode)
    if mode == "r":
        np.testing.assert_allclose(np.abs(ours), np.abs(np.asarray(theirs)), rtol=1e-4, atol=1e-5)
        return
    q, r = (np.asarray(v) for v in ours)
    jq, jr = (np.asarray(v) for v in theirs)
    assert q.shape == jq.shape and r.shape == jr.shape
    np.testing.assert_allclose(q @ r, a, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] +
                               (q.shape[-1],) * 2), atol=1e-5)
    assert np.all(np.abs(np.tril(r, -1)) == 0)
    # Householder QR is unique up to column signs: LAPACK's convention is the same on both sides.
    np.testing.assert_allclose(q, jq, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("batch,n", [((), 4), ((3,), 5), ((), 1)])
def test_eigh_matches_jax(batch, n):
    a = general(batch + (n, n))
    w, v = (np.asarray(t) for t in jnp.linalg.eigh(a))
    jw, jv = (np.asarray(t) for t in jjnp.linalg.eigh(a))
    np.testing.assert_allclose(w, jw, rtol=1e-4, atol=1e-4)
    sym = (a + np.swapaxes(a, -1, -2)) / 2
    np.testing.assert_allclose(sym @ v, v * w[..., None, :], rtol=1e-3, atol=1e-4)
    # Eigenvectors agree up to sign.
    np.testing.assert_allclose(np.abs(np.sum(v * jv, axis=-2)), 1, atol=1e-4)
    np.testing.assert_allclose(np.asarray(jnp.linalg.eigvalsh(a)), np.asarray(jjnp.linalg.eigvalsh(a)),
                               rtol=1e-4, atol=1e-4)


def test_eigh_upper_reads_the_upper_triangle():
    a = general((4, 4))
    for uplo in ("L", "U"):
        w = np.asarray(jnp.linalg.eigh(a, UPLO=uplo, symmetrize_input=False).eigenvalues)
        jw = np.asarray(jjnp.linalg.eigh(a, UPLO=uplo, symmetrize_input=False).eigenvalues)
        np.testing.assert_allclose(w, jw, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 3, 6)])
def test_svd_matches_jax(full_matrices, shape):
    a = general(shape)
    u, s, vh = (np.asarray(t) for t in jnp.linalg.svd(a, full_matrices=full_matrices))
    ju, js, jvh = (np.asarray(t) for t in jjnp.linalg.svd(a, full_matrices=full_matrices))
    assert (u.shape, s.shape, vh.shape) == (ju.shape, js.shape, jvh.shape)
    np.testing.assert_allclose(s, js, rtol=1e-4, atol=1e-5)
    k = s.shape[-1]
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(jnp.linalg.svdvals(a)), js, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit_diagonal", [True, False])
def test_triangular_solve_matches_jax(left_side, lower, transpose_a, unit_diagonal):
    a = general((2, 4, 4)) + 4 * np.eye(4, dtype=np.float32)
    b = general((2, 4, 3) if left_side else (2, 3, 4))
    kw = dict(left_side=left_side, lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    ours = np.asarray(lax.linalg.triangular_solve(a, b, **kw))
    theirs = np.asarray(jax.lax.linalg.triangular_solve(a, b, **kw))
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_solve_inv_det_slogdet_match_jax():
    a = general((3, 4, 4)) + 2 * np.eye(4, dtype=np.float32)
    b_vec, b_mat = general((4,)), general((3, 4, 2))
    np.testing.assert_allclose(np.asarray(jnp.linalg.solve(a[0], b_vec)),
                               np.asarray(jjnp.linalg.solve(a[0], b_vec)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.linalg.solve(a, b_mat)), np.asarray(jjnp.linalg.solve(a, b_mat)),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.linalg.inv(a)), np.asarray(jjnp.linalg.inv(a)), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.linalg.det(a)), np.asarray(jjnp.linalg.det(a)), rtol=1e-4)
    sign, logdet = jnp.linalg.slogdet(a)
    jsign, jlogdet = jjnp.linalg.slogdet(a)
    np.testing.assert_array_equal(np.asarray(sign), np.asarray(jsign))
    np.testing.assert_allclose(np.asarray(logdet), np.asarray(jlogdet), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.linalg.matrix_power(a, -2)),
                               np.asarray(jjnp.linalg.matrix_power(a, -2)), rtol=1e-3, atol=1e-4)


def test_pinv_lstsq_rank_cond_norms_match_jax():
    a = general((6, 4))
    b = general((6, 2))
    np.testing.assert_allclose(np.asarray(jnp.linalg.pinv(a)), np.asarray(jjnp.linalg.pinv(a)), rtol=1e-4,
                               atol=1e-5)
    for ours, theirs in zip(jnp.linalg.lstsq(a, b), jjnp.linalg.lstsq(a, b)):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-3, atol=1e-4)
    low_rank = a @ general((4, 2)) @ general((2, 4))
    assert int(jnp.linalg.matrix_rank(low_rank)) == int(jjnp.linalg.matrix_rank(low_rank)) == 2
    sq = general((4, 4))
    for p in (None, 2, -2, 1, "fro", np.inf):
        np.testing.assert_allclose(np.asarray(jnp.linalg.cond(sq, p)), np.asarray(jjnp.linalg.cond(sq, p)),
                                   rtol=1e-3)
    for order in (2, -2, "nuc"):
        np.testing.assert_allclose(np.asarray(jnp.linalg.norm(a, ord=order)),
                                   np.asarray(jjnp.linalg.norm(a, ord=order)), rtol=1e-4)
    xs = [general((3,)), general((3, 5)), general((5, 2)), general((2,))]
    np.testing.assert_allclose(np.asarray(jnp.linalg.multi_dot(xs)), np.asarray(jjnp.linalg.multi_dot(xs)),
                               rtol=1e-4, atol=1e-5)
    t = general((2, 3, 6)) + np.eye(6, dtype=np.float32).reshape(6, 6)[:, :].reshape(6, 6)[:2 * 3].reshape(
        2, 3, 6)
    np.testing.assert_allclose(np.asarray(jnp.linalg.tensorinv(t, ind=2)),
                               np.asarray(jjnp.linalg.tensorinv(t, ind=2)), rtol=1e-3, atol=1e-4)


def _grad_pair(f_ours, f_jax, *args, argnums=0):
    g = meshsim.grad(f_ours, argnums=argnums)(*args)
    jg = jax.grad(f_jax, argnums=argnums)(*args)
    return g, jg


GRAD_CASES = {
    "cholesky": (lambda m, x: m.numpy.sum(m.numpy.sin(m.numpy.linalg.cholesky(x))), lambda: spd(4)),
    "eigh_values": (lambda m, x: m.numpy.sum(m.numpy.linalg.eigvalsh(x) ** 3), lambda: general((4, 4))),
    "eigh_vectors": (lambda m, x: m.numpy.sum(m.numpy.linalg.eigh(x)[1] ** 2 * m.numpy.arange(4.0)),
                     lambda: general((4, 4))),
    "svd_values": (lambda m, x: m.numpy.sum(m.numpy.linalg.svd(x, compute_uv=False) ** 2), lambda: general((5, 3))),
    "svd_vectors": (lambda m, x: m.numpy.sum(m.numpy.abs(m.numpy.linalg.svd(x, full_matrices=False)[0]) *
                                             m.numpy.arange(3.0)), lambda: general((5, 3))),
    "svd_vh": (lambda m, x: m.numpy.sum((m.numpy.linalg.svd(x, full_matrices=False)[2] ** 2) *
                                        m.numpy.arange(5.0)), lambda: general((3, 5))),
    "qr": (lambda m, x: m.numpy.sum(m.numpy.linalg.qr(x)[0] ** 3) + m.numpy.sum(m.numpy.linalg.qr(x)[1] ** 3),
           lambda: general((5, 3))),
    "solve": (lambda m, x: m.numpy.sum(m.numpy.linalg.solve(x, m.numpy.arange(4.0)) ** 2),
              lambda: general((4, 4)) + 3 * np.eye(4, dtype=np.float32)),
    "inv": (lambda m, x: m.numpy.sum(m.numpy.sin(m.numpy.linalg.inv(x))),
            lambda: general((3, 3)) + 3 * np.eye(3, dtype=np.float32)),
    "det": (lambda m, x: m.numpy.linalg.det(x), lambda: general((3, 3))),
    "slogdet": (lambda m, x: m.numpy.linalg.slogdet(x)[1], lambda: general((4, 4))),
    "triangular_solve": (lambda m, x: m.numpy.sum(m.lax.linalg.triangular_solve(
        x + 4 * m.numpy.eye(4), m.numpy.ones((4, 2)), left_side=True, lower=True) ** 2), lambda: general((4, 4))),
    "pinv": (lambda m, x: m.numpy.sum(m.numpy.linalg.pinv(x) ** 2), lambda: general((5, 3))),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_jax(name):
    f, make = GRAD_CASES[name]
    x = make()
    g = np.asarray(meshsim.grad(lambda a: f(meshsim, a))(x))
    jg = np.asarray(jax.grad(lambda a: f(jax, a))(x))
    np.testing.assert_allclose(g, jg, rtol=2e-3, atol=2e-3)


def test_vmap_and_jit_of_decompositions_match_the_loop():
    a = spd(3, (4,))
    f = meshsim.jit(meshsim.vmap(lambda x: jnp.linalg.cholesky(x) @ jnp.linalg.inv(x)))
    expected = np.stack([np.linalg.cholesky(x) @ np.linalg.inv(x) for x in a])
    np.testing.assert_allclose(np.asarray(f(a)), expected, rtol=1e-4, atol=1e-5)
    jaxpr = str(meshsim.make_jaxpr(lambda x: lax.linalg.qr(x, full_matrices=False))(a[0]))
    assert "qr[" in jaxpr and "full_matrices=False" in jaxpr


@pytest.mark.parametrize("call", [
    lambda m: m.lax.linalg.qr(m.numpy.ones(3)),
    lambda m: m.lax.linalg.svd(m.numpy.ones(3)),
    lambda m: m.lax.linalg.lu(m.numpy.ones(3)),
    lambda m: m.lax.linalg.triangular_solve(m.numpy.ones((3, 3)), m.numpy.ones((4, 3)), left_side=True),
    lambda m: m.lax.linalg.triangular_solve(m.numpy.ones((3, 4)), m.numpy.ones((3, 3)), left_side=True),
    lambda m: m.numpy.linalg.inv(m.numpy.ones((3, 4))),
    lambda m: m.numpy.linalg.solve(m.numpy.ones((3, 3)), m.numpy.ones(4)),
    lambda m: m.numpy.linalg.eigh(m.numpy.ones((3, 3)), UPLO="X"),
])
def test_errors_match_jax(call):
    with pytest.raises(Exception) as theirs:
        call(jax)
    with pytest.raises(type(theirs.value)) as ours:
        call(meshsim)
    assert str(ours.value) == str(theirs.value)
