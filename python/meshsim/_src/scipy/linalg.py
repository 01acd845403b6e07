"""meshsim.scipy.linalg (as jax.scipy.linalg): SciPy's linear-algebra API on
the lax.linalg decompositions, and SciPy's special matrices."""
from __future__ import annotations

import math
import operator

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import core
from meshsim._src.lax import decompositions as lax_linalg
from meshsim._src.lax.control_flow import fori_loop
from meshsim._src.numpy import decompositions as np_linalg
from meshsim._src.numpy.decompositions import _mH, _mT
from meshsim._src.numpy.promotion import promote_dtypes_inexact

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "inv", "lu",
           "lu_factor", "lu_solve", "qr", "solve", "solve_triangular", "svd", "toeplitz", "circulant", "hankel",
           "hilbert", "polar", "companion", "pascal", "leslie", "helmert", "fiedler",
           "hadamard", "invhilbert", "convolution_matrix"]


def _default_float():
    return core.canonicalize_dtype(np.float64)  # float32 unless x64 is on


def _inexact(*xs):
    return promote_dtypes_inexact(*(core.asarray_value(x) for x in xs))




def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The Cholesky factor, upper by default as in SciPy."""
    (a,) = _inexact(a)
    # As SciPy, one triangle of a is read (the upper one by default), not a symmetrised a.
    factor = lax_linalg.cholesky(a if lower else _mH(a), symmetrize_input=False)
    return factor if lower else _mH(factor)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(c, lower): the factor for cho_solve."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """x with A x = b from A's Cholesky factor."""
    c, lower = c_and_lower
    c, b = _inexact(c, b)
    vector = b.ndim == c.ndim - 1
    if vector:
        b = b[..., None]
    # A = L L^H (lower) or U^H U: solve with the factor's conjugate transpose first or second.
    y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower,
                                    conjugate_a=not lower)
    x = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower)
    return x[..., 0] if vector else x


def det(a, overwrite_a: bool = False, check_finite: bool = True):
    return np_linalg.det(a)


def inv(a, overwrite_a: bool = False, check_finite: bool = True):
    return np_linalg.inv(a)


def _permutation_matrix(perm, dtype):
    n = perm.shape[-1]
    return (perm[..., None, :] == jnp.arange(n, dtype=perm.dtype)[:, None]).astype(dtype)


def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(p, l, u) with a = p @ l @ u, or (p @ l, u) with permute_l."""
    (a,) = _inexact(a)
    packed, _, perm = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(packed[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
    upper = jnp.triu(packed[..., :k, :])
    p = _permutation_matrix(perm, a.dtype)
    return (jnp.matmul(p, lower), upper) if permute_l else (p, lower, upper)


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True):
    """(lu, piv): the packed factors and the row swaps."""
    (a,) = _inexact(a)
    packed, pivots, _ = lax_linalg.lu(a)
    return packed, pivots


def lu_solve(lu_and_piv, b, trans: int = 0, overwrite_b: bool = False, check_finite: bool = True):
    """x with A x = b (trans=0), A^T x = b (trans=1) or A^H x = b (trans=2) from lu_factor's result."""
    packed, pivots = lu_and_piv
    packed, b = _inexact(packed, b)
    m = packed.shape[-1]
    perm = lax_linalg.lu_pivots_to_permutation(pivots, m)
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    if trans == 0:
        x = np_linalg._lu_solve(packed, perm, b)
    elif trans in (1, 2):
        conjugate = trans == 2
        z = lax_linalg.triangular_solve(packed, b, left_side=True, lower=False, transpose_a=True,
                                        conjugate_a=conjugate)
        z = lax_linalg.triangular_solve(packed, z, left_side=True, lower=True, transpose_a=True,
                                        conjugate_a=conjugate, unit_diagonal=True)
        inverse = jnp.argsort(perm, axis=-1)
        x = jnp.take_along_axis(z, jnp.broadcast_to(inverse[..., None], inverse.shape + z.shape[-1:]), axis=-2)
    else:
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    return x[..., 0] if vector else x


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
    """(q, r) for mode 'full' or 'economic'; (r,) for mode 'r'."""
    (a,) = _inexact(a)
    if pivoting:
        raise NotImplementedError("qr with pivoting=True is not implemented")
    if mode in ("full", "r"):
        full = True
    elif mode == "economic":
        full = False
    else:
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = lax_linalg.qr(a, full_matrices=full)
    return (r,) if mode == "r" else (q, r)


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False, debug: bool = False,
          check_finite: bool = True, assume_a: str = "gen"):
    """x with a @ x = b; assume_a='pos' solves by Cholesky."""
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"Expected assume_a to be one of {{'gen', 'sym', 'her', 'pos'}}, got {assume_a}.")
    if assume_a != "pos":
        return np_linalg.solve(a, b)
    (a,) = _inexact(a)
    return cho_solve(cho_factor(a, lower=lower), b)


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False, overwrite_b: bool = False,
                     debug=None, check_finite: bool = True):
    """x with op(a) x = b, a triangular; trans 0/'N', 1/'T', 2/'C'."""
    if trans in (0, "N"):
        transpose_a = False
    elif trans in (1, "T", 2, "C"):
        transpose_a = True
    else:
        raise ValueError(f"Invalid 'trans' value {trans}")
    a, b = _inexact(a, b)
    vector = b.ndim == a.ndim - 1
    if vector:
        b = b[..., None]
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose_a,
                                    conjugate_a=trans in (2, "C"), unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
    return np_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1,  # noqa: A002
         check_finite: bool = True):
    """Eigenvalues (and eigenvectors) of the symmetric matrix a."""
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
    if type != 1:
        raise NotImplementedError("Only the type=1 case of eigh is implemented.")
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented")
    (a,) = _inexact(a)
    v, w = lax_linalg.eigh(a, lower=lower)
    return w if eigvals_only else (w, v)


# Padé coefficients of exp (degree 13) and the 1-norm bounds under which lower degrees suffice
# (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005).
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = {np.dtype(np.float32): 3.925724783138660, np.dtype(np.float64): 5.371920351148152}


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16):
    """The matrix exponential by scaling and squaring with a degree-13 Padé approximant."""
    (A,) = _inexact(A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"expected A to be a (batched) square matrix, got A.shape={A.shape}")
    norm = jnp.max(jnp.sum(jnp.abs(A), axis=-2), axis=-1)
    theta = _THETA13[np.finfo(A.dtype).dtype]  # by the precision of A's parts
    needed = jnp.where(norm > theta, jnp.ceil(jnp.log2(jnp.maximum(norm, theta) / theta)), 0)
    squarings = jnp.minimum(needed, max_squarings)
    scaled = A / (2.0 ** squarings)[..., None, None].astype(A.dtype)
    eye = jnp.broadcast_to(jnp.eye(A.shape[-1], dtype=A.dtype), A.shape)
    b = _PADE13
    a2 = scaled @ scaled
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = scaled @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = np_linalg.solve(v - u, v + u)

    def square(i, x):
        return jnp.where((i < squarings)[..., None, None], x @ x, x)

    r = fori_loop(0, int(max_squarings), square, r)
    return jnp.where((needed > max_squarings)[..., None, None], jnp.nan, r)  # too many squarings: NaN, as JAX


def polar(a, side: str = "right", *, method: str = "qdwh", eps=None, max_iterations=None):
    """(u, p): a = u p (side='right') or p u, u unitary and p positive semi-definite, from the SVD."""
    if side not in ("right", "left"):
        raise ValueError(f"side={side} was not recognized.")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"method={method} is unsupported.")
    (a,) = _inexact(a)
    w, s, vh = np_linalg.svd(a, full_matrices=False)
    u = w @ vh
    if side == "right":
        p = (_mH(vh) * s[..., None, :].astype(vh.dtype)) @ vh
    else:
        p = (w * s[..., None, :].astype(w.dtype)) @ _mH(w)
    return u, p


def block_diag(*arrs):
    """The arrays (scalars, vectors as rows, matrices) placed along a diagonal."""
    if not arrs:
        return jnp.zeros((1, 0))
    arrs = [jnp.atleast_2d(core.asarray_value(a)) for a in arrs]
    bad = [i for i, a in enumerate(arrs) if a.ndim > 2]
    if bad:
        raise ValueError(f"Arguments to jax.scipy.linalg.block_diag must have at most 2 dimensions, got "
                         f"{arrs[bad[0]]} at argument {bad[0]}.")
    dtype = jnp.result_type(*arrs)
    cols = sum(a.shape[1] for a in arrs)
    rows, left = [], 0
    for a in arrs:
        rows.append(jnp.pad(a.astype(dtype), ((0, 0), (left, cols - left - a.shape[1]))))
        left += a.shape[1]
    return jnp.concatenate(rows, axis=0)


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column c and first row r (c by default)."""
    c = jnp.ravel(core.asarray_value(c))
    r = c if r is None else jnp.ravel(core.asarray_value(r))
    vals = jnp.concatenate([c[::-1], r[1:]])
    i = jnp.arange(c.shape[0])[:, None]
    j = jnp.arange(r.shape[0])[None, :]
    return vals[c.shape[0] - 1 - i + j]


def circulant(c):
    """The circulant matrix with first column c."""
    c = jnp.ravel(core.asarray_value(c))
    n = c.shape[0]
    return c[(jnp.arange(n)[:, None] - jnp.arange(n)[None, :]) % n]


def hankel(c, r=None):
    """The Hankel matrix with first column c and last row r (zeros below the anti-diagonal by default)."""
    c = jnp.ravel(core.asarray_value(c))
    r = jnp.zeros_like(c) if r is None else jnp.ravel(core.asarray_value(r))
    vals = jnp.concatenate([c, r[1:]])
    return vals[jnp.arange(c.shape[0])[:, None] + jnp.arange(r.shape[0])[None, :]]


def hilbert(n: int):
    """H[i, j] = 1 / (i + j + 1)."""
    a = jnp.arange(operator.index(n), dtype=_default_float())
    return 1.0 / (a[:, None] + a[None, :] + 1)


def invhilbert(n: int):
    """The exact inverse of hilbert(n), as floats."""
    n = operator.index(n)
    out = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            s = i + j
            out[i, j] = ((-1) ** s * (s + 1) * math.comb(n + i, n - j - 1) * math.comb(n + j, n - i - 1)
                         * math.comb(s, i) ** 2)
    return jnp.asarray(out, dtype=_default_float())


def companion(a):
    """The companion matrix of the polynomial with coefficients a (highest degree first)."""
    a = jnp.atleast_1d(core.asarray_value(a))
    if a.ndim != 1:
        raise ValueError("Incorrect shape for `a`.  `a` must be one-dimensional.")
    if a.shape[0] < 2:
        raise ValueError("The length of `a` must be at least 2.")
    n = a.shape[0]
    first = -a[1:] / (1.0 * a[0])
    below = jnp.eye(n - 2, n - 1, dtype=first.dtype)
    return jnp.concatenate([first[None, :], below], axis=0) if n > 2 else first[None, :]


def fiedler(a):
    """F[i, j] = |a[i] - a[j]|."""
    a = jnp.atleast_1d(core.asarray_value(a))
    return jnp.abs(a[:, None] - a[None, :])


def pascal(n: int, kind: str | None = None):
    """The Pascal matrix ('symmetric', 'lower' or 'upper')."""
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"Expected kind to be one of 'symmetric', 'lower', or 'upper'; got {kind}")
    n = operator.index(n)
    low = np.array([[math.comb(i, j) for j in range(n)] for i in range(n)], dtype=np.float64)
    out = {"lower": low, "upper": low.T, "symmetric": low @ low.T}[kind]
    return jnp.asarray(out, dtype=_default_float())


def leslie(f, s):
    """The Leslie matrix of fecundities f and survival rates s."""
    f, s = jnp.atleast_1d(core.asarray_value(f)), jnp.atleast_1d(core.asarray_value(s))
    n = f.shape[0]
    if s.shape[0] != n - 1:
        raise ValueError(f"Incorrect lengths for f and s. The length of s must be one less than the length of "
                         f"f, got len(f)={n} and len(s)={s.shape[0]}")
    dtype = jnp.result_type(f, s)
    below = jnp.concatenate([jnp.diag(s.astype(dtype)), jnp.zeros((n - 1, 1), dtype)], axis=1)
    return jnp.concatenate([f[None, :].astype(dtype), below], axis=0)


def helmert(n: int, full: bool = False):
    """The Helmert matrix (orthogonal; without its first row unless full)."""
    n = operator.index(n)
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0] = 1
    d[0] = n
    out = h / np.sqrt(d)[:, None]
    out = out if full else out[1:]
    return jnp.asarray(out, dtype=_default_float())


def hadamard(n: int, dtype=int):
    """The Sylvester Hadamard matrix of order n (a power of 2)."""
    n = operator.index(n)
    if n < 1 or n & (n - 1):
        raise ValueError("n must be an positive a power of 2 integer")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtype=dtype)


def convolution_matrix(a, n: int, mode: str = "full"):
    """The matrix whose product with a vector of length n convolves it with a."""
    a = core.asarray_value(a)
    if a.ndim != 1:
        raise ValueError("convolution_matrix expects a one-dimensional input a")
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    m = a.shape[0]
    full = jnp.concatenate([a, jnp.zeros((n - 1,), a.dtype)])
    rows = jnp.arange(m + n - 1)[:, None] - jnp.arange(n)[None, :]
    mat = jnp.where((rows >= 0) & (rows < m), full[jnp.clip(rows, 0, m + n - 2)], 0).astype(a.dtype)
    if mode == "full":
        return mat
    if mode == "same":  # centred, as long as the longer of a and the vector
        start = (min(m, n) - 1) // 2
        return mat[start:start + max(m, n)]
    if mode == "valid":
        return mat[min(m, n) - 1:max(m, n)]
    raise ValueError(f"mode={mode!r} not recognized")
