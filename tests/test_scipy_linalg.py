"""meshsim.scipy.linalg against jax.scipy.linalg: factorizations, solves,
expm, the special matrices, and gradients through them."""
import numpy as np
import pytest

import meshsim
import meshsim.scipy.linalg as msl

jax = pytest.importorskip("jax")
import jax.scipy.linalg as jsl  # noqa: E402

RNG = np.random.default_rng(1)


def mat(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def spd(n):
    x = mat(n, n)
    return x @ x.T + n * np.eye(n, dtype=np.float32)


def close(ours, theirs, rtol=1e-4, atol=1e-4):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            close(o, t, rtol, atol)
        return
    o, t = np.asarray(ours), np.asarray(theirs)
    assert o.shape == t.shape and o.dtype == t.dtype, (o.shape, t.shape, o.dtype, t.dtype)
    np.testing.assert_allclose(o, t, rtol=rtol, atol=atol)


A, B, V, S = mat(5, 5) + 3 * np.eye(5, dtype=np.float32), mat(5, 3), mat(5), spd(5)
CASES = {
    "cholesky": lambda m: m.cholesky(S),
    "cholesky_lower": lambda m: m.cholesky(S, lower=True),
    "cho_solve": lambda m: m.cho_solve(m.cho_factor(S), B),
    "cho_solve_lower_vector": lambda m: m.cho_solve(m.cho_factor(S, lower=True), V),
    "det": lambda m: m.det(A),
    "inv": lambda m: m.inv(A),
    "lu": lambda m: m.lu(mat(4, 6) if False else A),
    "lu_permute_l": lambda m: m.lu(A, permute_l=True),
    "lu_rect": lambda m: m.lu(B),
    "lu_factor": lambda m: m.lu_factor(A),
    "lu_solve": lambda m: m.lu_solve(m.lu_factor(A), B),
    "lu_solve_t": lambda m: m.lu_solve(m.lu_factor(A), V, trans=1),
    "qr_economic": lambda m: m.qr(B, mode="economic"),
    "solve": lambda m: m.solve(A, B),
    "solve_pos": lambda m: m.solve(S, V, assume_a="pos"),
    "solve_triangular": lambda m: m.solve_triangular(np.triu(A), B),
    "solve_triangular_lower_t": lambda m: m.solve_triangular(np.tril(A), V, trans="T", lower=True),
    "svd_values": lambda m: m.svd(B, compute_uv=False),
    "eigh_values": lambda m: m.eigh(S, eigvals_only=True),
    "expm_small": lambda m: m.expm(0.1 * A),
    "expm_large": lambda m: m.expm(3 * A),
    "expm_batched": lambda m: m.expm(np.stack([0.5 * A, -A])),
    "polar_right": lambda m: m.polar(A, method="svd"),
    "polar_left": lambda m: m.polar(B, side="left", method="svd"),
    "block_diag": lambda m: m.block_diag(np.ones((2, 2)), np.arange(3.0), 5.0),
    "toeplitz": lambda m: m.toeplitz(np.arange(4.0), np.arange(10.0, 16.0)),
    "toeplitz_c": lambda m: m.toeplitz(np.arange(1.0, 4.0)),
    "circulant": lambda m: m.circulant(np.arange(4.0)),
    "hankel": lambda m: m.hankel(np.arange(3.0), np.arange(2.0, 7.0)),
    "hilbert": lambda m: m.hilbert(4),
    "companion": lambda m: m.companion(np.array([2.0, 3.0, 4.0, 5.0])),
    "fiedler": lambda m: m.fiedler(np.array([1.0, 4.0, 2.0])),
    "pascal_lower": lambda m: m.pascal(4, kind="lower"),
    "pascal": lambda m: m.pascal(5),
    "leslie": lambda m: m.leslie(np.array([0.1, 2.0, 1.0]), np.array([0.2, 0.8])),
    "helmert": lambda m: m.helmert(5),
    "helmert_full": lambda m: m.helmert(4, full=True),
    "hadamard": lambda m: m.hadamard(8),
    "convolution_full": lambda m: m.convolution_matrix(np.array([1.0, 2.0, 3.0]), 5),
    "convolution_same": lambda m: m.convolution_matrix(np.array([1.0, 2.0, 3.0, 4.0]), 3, mode="same"),
    "convolution_valid": lambda m: m.convolution_matrix(np.array([1.0, 2.0, 3.0]), 5, mode="valid"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    rtol = 2e-3 if name.startswith("expm") else 1e-4
    close(CASES[name](msl), CASES[name](jsl), rtol=rtol, atol=rtol)


def test_decompositions_reconstruct():
    q, r = msl.qr(A)
    np.testing.assert_allclose(np.asarray(q @ r), A, atol=1e-4)
    p, lower, upper = msl.lu(B)
    np.testing.assert_allclose(np.asarray(p @ lower @ upper), B, atol=1e-5)
    w, v = msl.eigh(S)
    np.testing.assert_allclose(np.asarray(v * w) , S @ np.asarray(v), rtol=1e-3, atol=1e-3)


def test_expm_gradient_matches_jax():
    x = 0.3 * mat(3, 3)
    g = meshsim.grad(lambda a: meshsim.numpy.sum(msl.expm(a) ** 2))(x)
    jg = jax.grad(lambda a: jax.numpy.sum(jsl.expm(a) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("call", [
    lambda m: m.solve(np.eye(3), np.ones(3), assume_a="banana"),
    lambda m: m.companion(np.ones(1)),
    lambda m: m.leslie(np.ones(3), np.ones(3)),
    lambda m: m.eigh(np.eye(3), np.eye(3)),
])
def test_errors_match_jax(call):
    with pytest.raises(Exception) as theirs:
        call(jsl)
    with pytest.raises(type(theirs.value)):
        call(msl)


@pytest.mark.parametrize("seed", range(4))
def test_pivots_to_permutation_of_traced_pivots_matches_jax(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    shape = tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(0, 3)))) + (n, n)
    pivots = np.asarray(jax.lax.linalg.lu(rng.standard_normal(shape).astype(np.float32))[1])
    size = n + int(rng.integers(0, 3))
    want = np.asarray(jax.lax.linalg.lu_pivots_to_permutation(pivots, size))
    traced = meshsim.jit(lambda p: meshsim.lax.linalg.lu_pivots_to_permutation(p, size))(pivots)
    eager = meshsim.lax.linalg.lu_pivots_to_permutation(pivots, size)
    for got in (traced, eager):
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), want)
