"""The parts of `jax.scipy.linalg` built on the Schur and Hessenberg reductions (lax.linalg.schur,
hessenberg, householder_product: LAPACK's gees, gehrd, orgqr/ungqr), as JAX builds them:

- sqrtm: the complex Schur form's square root by Bjorck and Hammarling's column recurrence;
- rsf2csf: real to complex Schur form by one Givens rotation per 2x2 diagonal block;
- funm: f on the complex Schur form's diagonal, Parlett's recurrence (Golub and Van Loan 11.1.1)
  above it;
- solve_sylvester: Bartels-Stewart on the two complex Schur forms (or the eigen-decompositions);
- expm_frechet: the JVP of expm; qr_multiply: Q from the QR factorisation applied to c;
- eigh_tridiagonal: the eigenvalues (and vectors) of the dense tridiagonal matrix by eigh;
- dft: the DFT matrix."""
from __future__ import annotations

import math

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src.lax import namespace as lax
from meshsim._src import core
from meshsim._src.lax import decompositions as lax_linalg
from meshsim._src.numpy import decompositions as np_linalg
from meshsim._src.numpy.matrix import norm
from meshsim._src.numpy.promotion import promote_dtypes_inexact

__all__ = ["schur", "hessenberg", "sqrtm", "rsf2csf", "funm", "solve_sylvester", "expm_frechet",
           "qr_multiply", "eigh_tridiagonal", "dft"]


def _complex_dtype(dtype):
    return np.result_type(dtype, np.complex64)


def schur(a, output: str = "real"):
    """[T, Z] with a = Z T Z^H: T quasi-upper-triangular ('real') or upper triangular ('complex')."""
    a = core.asarray_value(a)
    if output == "complex":
        a = a.astype(_complex_dtype(a.dtype))
    return lax_linalg.schur(a)


def hessenberg(a, *, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """H (zero below the first subdiagonal), and Q with a = Q H Q^H when calc_q."""
    del overwrite_a, check_finite
    a = core.asarray_value(a)
    n = a.shape[-1]
    if n == 0:
        return (jnp.zeros_like(a), jnp.zeros_like(a)) if calc_q else jnp.zeros_like(a)
    packed, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(packed, -1)
    if not calc_q:
        return h
    # Q fixes e_1; its trailing block is the product of the reflectors stored below the subdiagonal.
    q = lax_linalg.householder_product(packed[..., 1:, :-1], taus)
    batch = packed.shape[:-2]
    q = jnp.block([[jnp.ones(batch + (1, 1), packed.dtype), jnp.zeros(batch + (1, n - 1), packed.dtype)],
                   [jnp.zeros(batch + (n - 1, 1), packed.dtype), q]])
    return h, q


def _sqrtm_upper(t):
    """The upper triangular square root u of upper triangular t, column by column from the
    diagonal up: u_ij = (t_ij - sum_{i<k<j} u_ik u_kj) / (u_ii + u_jj)."""
    diag = jnp.sqrt(jnp.diagonal(t))
    n = diag.shape[0]
    idx = jnp.arange(n)

    def column(j, u):
        def row(step, u):
            i = j - 1 - step
            between = (idx > i) & (idx < j)
            s = jnp.sum(jnp.where(between, u[i, :] * u[:, j], 0))
            value = jnp.where(t[i, j] == s, 0.0, (t[i, j] - s) / (diag[i] + diag[j]))
            return u.at[i, j].set(value.astype(u.dtype))
        return lax.fori_loop(0, j, row, u)
    return lax.fori_loop(0, n, column, jnp.diag(diag))


def sqrtm(A, blocksize: int = 1):
    """The principal square root of A, complex, by the complex Schur method."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    t, z = schur(A, output="complex")
    root = _sqrtm_upper(t)
    highest = lax.Precision.HIGHEST
    return jnp.matmul(jnp.matmul(z, root, precision=highest), jnp.conj(z.T), precision=highest)


def _rsf2csf_2d(t, z):
    t, z = promote_dtypes_inexact(t, z)
    t, z = t.astype(_complex_dtype(t.dtype)), z.astype(_complex_dtype(z.dtype))
    eps = float(jnp.finfo(t.dtype).eps)
    n = t.shape[0]
    if n == 1:
        return t, z
    idx = jnp.arange(n)

    def rotate(m, t, z):
        # The Givens rotation that zeroes t[m, m-1] using one eigenvalue of the 2x2 block.
        mu = np_linalg.eigvals(lax.dynamic_slice(t, (m - 1, m - 1), (2, 2))) - t[m, m]
        r = norm(jnp.stack([mu[0], t[m, m - 1]])).astype(t.dtype)
        c, s = mu[0] / r, t[m, m - 1] / r
        g = jnp.stack([jnp.stack([c.conj(), s]), jnp.stack([-s, c])]).astype(t.dtype)
        rows = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=0)
        right = idx >= m - 1
        rows = jnp.where(right, g @ jnp.where(right, rows, 0), rows)
        t = lax.dynamic_update_slice_in_dim(t, rows, m - 1, axis=0)
        cols = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=1)
        above = idx[:, None] < m + 1
        cols = jnp.where(above, jnp.where(above, cols, 0) @ g.conj().T, cols)
        t = lax.dynamic_update_slice_in_dim(t, cols, m - 1, axis=1)
        zc = lax.dynamic_slice_in_dim(z, m - 1, 2, axis=1)
        return t, lax.dynamic_update_slice_in_dim(z, zc @ g.conj().T, m - 1, axis=1)

    def step(i, tz):
        t, z = tz
        m = n - i
        coupled = jnp.abs(t[m, m - 1]) > eps * (jnp.abs(t[m - 1, m - 1]) + jnp.abs(t[m, m]))
        t, z = lax.cond(coupled, rotate, lambda m, t, z: (t, z), m, t, z)
        return t.at[m, m - 1].set(0.0), z
    return lax.fori_loop(1, n, step, (t, z))


def rsf2csf(T, Z, check_finite: bool = True):
    """The complex Schur form (T, Z) of a real Schur form (T, Z) (batch dimensions broadcast)."""
    del check_finite
    t, z = jnp.asarray(T), jnp.asarray(Z)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError("Input 'T' must be square.")
    if z.ndim < 2 or z.shape[-1] != z.shape[-2]:
        raise ValueError("Input 'Z' must be square.")
    if t.shape[-1] != z.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {z.shape} vs. T: {t.shape}")
    return jnp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(t, z)


def _parlett(f, t):
    """F above the diagonal from F's diagonal and the triangular T (F T = T F), superdiagonal by
    superdiagonal; also the smallest gap |t_jj - t_ii| met (the error estimate's denominator)."""
    n = t.shape[0]
    idx = jnp.arange(n)

    def diagonal(p, state):
        def entry(i, state):
            f, gap = state
            j = i + p
            s = t[i - 1, j - 1] * (f[j - 1, j - 1] - f[i - 1, i - 1])
            inner = (idx >= i) & (idx < j - 1)
            s = s + (jnp.where(inner, t[i - 1], 0) @ jnp.where(inner, f[:, j - 1], 0)
                     - jnp.where(inner, f[i - 1], 0) @ jnp.where(inner, t[:, j - 1], 0))
            den = t[j - 1, j - 1] - t[i - 1, i - 1]
            s = jnp.where(den != 0, s / den, s)
            return f.at[i - 1, j - 1].set(s), jnp.minimum(gap, jnp.abs(den))
        return lax.fori_loop(1, n - p + 1, entry, state)
    return lax.fori_loop(1, n, diagonal, (f, jnp.abs(t[0, 0])))


def funm(A, func, disp: bool = True):
    """The matrix function f(A) for an elementwise f, by Schur-Parlett; with disp=False also
    SciPy's estimate of the relative error."""
    a = jnp.asarray(A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("expected square array_like input")
    t, z = schur(a)
    t, z = rsf2csf(t, z)
    f = jnp.diag(func(jnp.diag(t))).astype(t.dtype)
    f, gap = _parlett(f, t)
    f = z @ f @ z.conj().T
    if disp:
        return f
    tol = float(jnp.finfo(np.float32 if f.dtype == np.complex64 else np.float64).eps)
    gap = jnp.where(gap == 0.0, tol, gap)
    err = jnp.where(jnp.any(jnp.isinf(f)), np.inf,
                    jnp.minimum(1, jnp.maximum(tol, (tol / gap) * norm(jnp.triu(t, 1), 1))))
    return f, err


def _sylvester_triangular(r, s, f):
    """Y with R Y + Y S^T = F for upper triangular R and lower triangular S^T (s given as its
    transpose), solved entry by entry from the bottom-right corner."""
    m, n = f.shape
    rows, cols = jnp.arange(m), jnp.arange(n)

    def solve_entry(y, flat):
        i, j = flat // n, flat % n
        y2 = y.reshape(m, n)
        rhs = f[i, j] - jnp.sum(jnp.where(rows > i, r[i, :] * y2[:, j], 0.0)) \
            - jnp.sum(jnp.where(cols > j, y2[i, :] * s[:, j], 0.0))
        return y.at[i * n + j].set(rhs / (r[i, i] + s[j, j])), None
    y, _ = lax.scan(solve_entry, jnp.zeros(m * n, f.dtype), jnp.arange(m * n - 1, -1, -1))
    return y.reshape(m, n)


def _solve_sylvester_2d(a, b, c, *, method: str, tol: float):
    m, n = c.shape[-2:]
    if method == "schur":
        r, u = schur(a, output="complex")
        s, v = schur(b.conj().T, output="complex")
        f = u.conj().T @ c.astype(r.dtype) @ v
        x = u @ _sylvester_triangular(r, s.conj().T, f) @ v.conj().T
    elif method == "eigen":
        ra, ua = np_linalg.eig(a)
        rb, ub = np_linalg.eig(b)
        f = np_linalg.solve(ua, c.astype(ra.dtype) @ ub)
        y = f / (ra[:, None] + rb[None, :])
        x = ua[:m, :m] @ y[:m, :n] @ np_linalg.inv(ub)[:n, :n]
    else:
        raise ValueError(f"Unrecognized method {method}. The two valid methods are either \"schur\" or \"eigen\".")
    if not jnp.issubdtype(c.dtype, jnp.complexfloating):
        x = x.real
    singular = jnp.any(jnp.abs(np_linalg.eigvals(a)[:, None] + np_linalg.eigvals(b)[None, :]) < tol)
    return jnp.where(singular, jnp.zeros_like(x) * np.nan, x)


def solve_sylvester(A, B, C, *, method: str = "schur", tol: float = 1e-8):
    """X with A X + X B = C (NaNs when an eigenvalue of A and one of B nearly cancel)."""
    a, b, c = promote_dtypes_inexact(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
    m, n = c.shape[-2:]
    if a.shape[-2:] != (m, m) or b.shape[-2:] != (n, n):
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {a.shape}\nB: {b.shape}\nC: {c.shape}")
    solve_2d = lambda a, b, c: _solve_sylvester_2d(a, b, c, method=method, tol=tol)  # noqa: E731
    return jnp.vectorize(solve_2d, signature="(m,m),(n,n),(m,n)->(m,n)")(a, b, c)


def expm_frechet(A, E, *, method: str | None = None, compute_expm: bool = True):
    """(expm(A), the derivative of expm at A in direction E), or only the derivative."""
    from meshsim._src.ad import jvp
    from meshsim._src.scipy.linalg import expm
    del method
    a, e = jnp.asarray(A), jnp.asarray(E)
    if a.ndim < 2 or a.shape[-2] != a.shape[1]:
        raise ValueError(f"expected A to be a (batched) square matrix, got A.shape={a.shape}")
    if e.ndim < 2 or e.shape[-2] != e.shape[-1]:
        raise ValueError(f"expected E to be a (batched) square matrix, got E.shape={e.shape}")
    if a.shape != e.shape:
        raise ValueError(f"expected A and E to be the same shape, got A.shape={a.shape} E.shape={e.shape}")
    expm_a, derivative = jvp(lambda x: expm(x, upper_triangular=False, max_squarings=16), (a,), (e,))
    return (expm_a, derivative) if compute_expm else derivative


def qr_multiply(a, c, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False):
    """(c Q, R) for mode='right' or (Q c, R) for 'left', from a = Q R (Q conjugated if asked)."""
    del overwrite_a, overwrite_c
    a, c = promote_dtypes_inexact(jnp.asarray(a), jnp.asarray(c))
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    if pivoting:
        raise NotImplementedError("qr_multiply(..., pivoting=True) needs LAPACK's geqp3, not available here.")
    onedim = c.ndim == 1
    if onedim:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape {tuple(a.shape)} "
                         f"so Q has {k} columns, but c has {c.shape[-2]} rows (expected {k}).")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape {tuple(a.shape)} "
                         f"so Q has {m} rows, but c has {c.shape[-1]} columns (expected {m}).")
    batch = jnp.broadcast_shapes(a.shape[:-2], c.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    c = jnp.broadcast_to(c, batch + c.shape[-2:])
    q, r = lax_linalg.qr(a, full_matrices=False)
    if conjugate:
        q = q.conj()
    out = c @ q if mode == "right" else q @ c
    if onedim:
        out = out.ravel()
    return out, jnp.triu(r[..., :k, :])


def eigh_tridiagonal(d, e, *, eigvals_only: bool = False, select: str = "a", select_range=None,
                     tol=None, key=None):
    """Eigenvalues (ascending; those of select='i''s index range) and, unless eigvals_only,
    eigenvectors of the real symmetric (or Hermitian) tridiagonal matrix diag(d) + offdiag(e)."""
    del tol, key
    alpha, beta = jnp.asarray(d), jnp.asarray(e)
    supported = (np.float32, np.float64, np.complex64, np.complex128)
    if alpha.dtype != beta.dtype:
        raise TypeError(f"diagonal and off-diagonal values must have same dtype, got {alpha.dtype} and {beta.dtype}")
    if alpha.dtype not in supported or beta.dtype not in supported:
        raise TypeError("Only float32 and float64 inputs are supported as inputs to "
                        f"jax.scipy.linalg.eigh_tridiagonal, got {alpha.dtype} and {beta.dtype}")
    n = alpha.shape[0]
    if n <= 1:
        return jnp.real(alpha) if eigvals_only else (jnp.real(alpha), jnp.eye(n, dtype=alpha.dtype))
    if select == "a":
        lo, hi = 0, n - 1
    elif select == "i":
        if select_range is None:
            raise ValueError("for select='i', select_range must be specified.")
        if select_range[0] > select_range[1]:
            raise ValueError("Got empty index range in select_range.")
        lo, hi = int(select_range[0]), int(select_range[1])
    elif select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
    else:
        raise ValueError("'select must have a value in {'a', 'i', 'v'}.")
    matrix = jnp.diag(alpha) + jnp.diag(beta, -1) + jnp.diag(beta.conj(), 1)
    values, vectors = np_linalg.eigh(matrix)
    values = values[lo:hi + 1]
    return values if eigvals_only else (values, vectors[:, lo:hi + 1])


def dft(n: int, scale: str | None = None, *, dtype=None):
    """The n x n DFT matrix exp(-2 pi i jk / n), unscaled or scaled by 1/sqrt(n) or 1/n."""
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    if dtype is None:
        dtype = core.canonicalize_dtype(np.complex128)
    else:
        dtype = np.dtype(dtype)
        if not jnp.issubdtype(dtype, jnp.complexfloating):
            raise ValueError(f"dtype must be a complex floating-point type; got {dtype}.")
        dtype = core.canonicalize_dtype(dtype)
    k = jnp.arange(n, dtype=dtype)
    omegas = jnp.exp(-2j * math.pi * k[:, None] * k[None, :] / n)
    if scale == "sqrtn":
        omegas = omegas / jnp.sqrt(n)
    elif scale == "n":
        omegas = omegas / n
    return omegas
