"""meshsim.numpy.linalg: decompositions and what is built on them (as jax.numpy.linalg).

Written from the lax.linalg primitives as JAX writes them. Gradients flow
through the primitives' own rules (solve, inv, det and slogdet differentiate
through `lu` and `triangular_solve`)."""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import core
from meshsim._src.lax import decompositions as lax_linalg
from meshsim._src.numpy.creation import _check_arraylike
from meshsim._src.numpy.promotion import promote_dtypes_inexact

__all__ = ["cholesky", "qr", "eig", "eigvals", "eigh", "eigvalsh", "svd", "svdvals", "solve", "inv", "det", "slogdet", "lstsq",
           "pinv", "matrix_rank", "cond", "multi_dot", "tensorsolve", "tensorinv", "EighResult", "QRResult",
           "SVDResult", "SlogdetResult"]


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


def _inexact(name: str, *xs):
    for x in xs:
        _check_arraylike(name, x)
    return promote_dtypes_inexact(*(core.asarray_value(x) for x in xs))


def _square_stack(name: str, a, what: str = "Argument to {name}"):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{what.format(name=name)} must have shape [..., n, n], got {a.shape}.")


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _mH(x):
    """The conjugate transpose of a matrix stack."""
    return jnp.conj(_mT(x)) if jnp.iscomplexobj(x) else _mT(x)


def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """The Cholesky factor (lower, or upper with upper=True) of Hermitian positive-definite matrices."""
    (a,) = _inexact("jnp.linalg.cholesky", a)
    factor = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _mH(factor) if upper else factor


def qr(a, mode: str = "reduced"):
    """QRResult(Q, R), or R alone for mode='r'."""
    (a,) = _inexact("jnp.linalg.qr", a)
    if mode == "raw":
        raise NotImplementedError("The 'raw' mode of jnp.linalg.qr is not implemented")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = lax_linalg.qr(a, full_matrices=(mode == "complete"))
    return r if mode == "r" else QRResult(q, r)


def _uplo_lower(UPLO) -> bool:
    if UPLO is None or UPLO == "L":
        return True
    if UPLO == "U":
        return False
    raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")


def eig(a):
    """(eigenvalues, right eigenvectors as columns) of general square matrices, complex."""
    (a,) = _inexact("jnp.linalg.eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return w, v


def eigvals(a):
    """The (complex) eigenvalues of general square matrices."""
    (a,) = _inexact("jnp.linalg.eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


def eigh(a, UPLO: str | None = None, symmetrize_input: bool = True):
    """EighResult(eigenvalues ascending, eigenvectors as columns) of symmetric matrices."""
    (a,) = _inexact("jnp.linalg.eigh", a)
    v, w = lax_linalg.eigh(a, lower=_uplo_lower(UPLO), symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO: str | None = "L", *, symmetrize_input: bool = True):
    """The ascending eigenvalues of symmetric matrices."""
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index=None):
    """SVDResult(U, S, Vh) with S descending, or S alone when compute_uv is False."""
    (a,) = _inexact("jnp.linalg.svd", a)
    if hermitian:
        w, v = eigh(a)
        s = jnp.abs(w)
        order = jnp.argsort(-s, axis=-1)
        s = jnp.take_along_axis(s, order, axis=-1)
        if not compute_uv:
            return s
        u = jnp.take_along_axis(v, order[..., None, :], axis=-1)
        signs = jnp.take_along_axis(jnp.sign(w), order, axis=-1)
        return SVDResult(u, s, _mH(u * signs[..., None, :].astype(u.dtype)))
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                         subset_by_index=subset_by_index)
    return SVDResult(*out) if compute_uv else out


def svdvals(x, /):
    """The singular values of x, descending."""
    return svd(x, compute_uv=False, hermitian=False)


def _lu_solve(lu, permutation, b):
    """x with A x = b for each column of b, from A's LU factors (P A = L U)."""
    rows = jnp.take_along_axis(b, jnp.broadcast_to(permutation[..., None], permutation.shape + b.shape[-1:]),
                               axis=-2)
    y = lax_linalg.triangular_solve(lu, rows, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, y, left_side=True, lower=False)


def solve(a, b):
    """x with a @ x = b; b a vector (..., n) or a stack of matrices (..., n, k)."""
    a, b = _inexact("jnp.linalg.solve", a, b)
    _square_stack("solve", a, "a")
    if b.ndim == 1:
        if b.shape[0] != a.shape[-1]:
            raise ValueError(f"inconsistent size for core dimension 'm': {b.shape[0]} vs {a.shape[-1]} on "
                             "vectorized function with excluded=frozenset() and signature='(m,m),(m)->(m)'")
        bm = jnp.broadcast_to(b[:, None], a.shape[:-1] + (1,))
        return solve(a, bm)[..., 0]
    if b.shape[-2] != a.shape[-1]:
        raise ValueError(f"inconsistent size for core dimension 'm': {b.shape[-2]} vs {a.shape[-1]} on "
                         "vectorized function with excluded=frozenset() and signature='(m,m),(m,n)->(m,n)'")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    lu, _, permutation = lax_linalg.lu(a)
    return _lu_solve(lu, permutation, b)


def inv(a):
    """The inverse of each square matrix."""
    (a,) = _inexact("jnp.linalg.inv", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Argument to inv must have shape [..., n, n], got {a.shape}.")
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return solve(a, eye)


def _lu_parts(name: str, a):
    (a,) = _inexact(f"jnp.linalg.{name}", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Argument to _{name}() must have shape [..., n, n], got {a.shape}")
    lu, pivots, _ = lax_linalg.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    swaps = jnp.sum(pivots != jnp.arange(a.shape[-1], dtype=pivots.dtype), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
    return diag, parity


def det(a):
    """The determinant of each square matrix."""
    diag, parity = _lu_parts("det", a)
    return parity * jnp.prod(diag, axis=-1)


def slogdet(a, *, method: str | None = None):
    """SlogdetResult(sign, log|det|) of each square matrix."""
    if method not in (None, "lu"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' (`None`), and 'qr'."
                         if method != "qr" else "slogdet method 'qr' is not implemented")
    diag, parity = _lu_parts("slogdet", a)
    sign = parity * jnp.prod(jnp.sign(diag), axis=-1)
    logabsdet = jnp.sum(jnp.log(jnp.abs(diag)), axis=-1)
    return SlogdetResult(sign, logabsdet)


def _default_rtol(a, s_dtype):
    return np.finfo(s_dtype).eps * max(a.shape[-2:])


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse, from the SVD with small singular values dropped."""
    (a,) = _inexact("jnp.linalg.pinv", a)
    if rcond is not None:
        rtol = rcond
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return jnp.empty(a.shape[:-2] + (n, m), a.dtype)
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    if rtol is None:
        rtol = _default_rtol(a, s.dtype)
    cutoff = jnp.asarray(rtol)[..., None] * s[..., :1]
    s_inv = jnp.where(s > cutoff, 1 / s, 0).astype(u.dtype)
    return jnp.matmul(_mH(vh) * s_inv[..., None, :], _mH(u))


def matrix_rank(M, rtol=None, *, tol=None):
    """How many singular values exceed rtol times the largest (or tol, absolute)."""
    (M,) = _inexact("jnp.linalg.matrix_rank", M)
    if M.ndim < 2:
        return (M != 0).any().astype(np.int32)
    s = svd(M, compute_uv=False)
    if tol is not None:
        threshold = jnp.asarray(tol)
    else:
        if rtol is None:
            rtol = _default_rtol(M, s.dtype)
        threshold = jnp.asarray(rtol)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    return jnp.sum(s > threshold, axis=-1)


def _squared_residuals(a, x, b):
    r = jnp.matmul(a, x) - b
    return jnp.sum(jnp.square(jnp.abs(r) if jnp.iscomplexobj(r) else r), axis=0)


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """(x, residuals, rank, s): the least-squares solution of a @ x = b by the SVD."""
    a, b = _inexact("jnp.linalg.lstsq", a, b)
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim not in (1, 2):
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or two-dimensional")
    m, n = a.shape
    b_vector = b.ndim == 1
    if b_vector:
        b = b[:, None]
    if b.shape[0] != m:
        raise ValueError("Incompatible shapes for arguments to lstsq: {} and {}".format(a.shape, b.shape))
    u, s, vh = svd(a, full_matrices=False)
    if rcond is None:
        rcond = np.finfo(s.dtype).eps * max(m, n)
    elif rcond < 0:
        rcond = np.finfo(s.dtype).eps
    mask = s >= jnp.asarray(rcond, s.dtype) * s[0] if s.shape[0] else s > 0
    rank = jnp.sum(mask)
    s_inv = jnp.where(mask, 1 / jnp.where(mask, s, 1), 0)
    x = jnp.matmul(_mH(vh), s_inv[:, None].astype(u.dtype) * jnp.matmul(_mH(u), b))
    if numpy_resid:
        if rank.item() == n and m > n:
            resid = _squared_residuals(a, x, b)
        else:
            resid = jnp.empty((0,), s.dtype)
    else:
        resid = _squared_residuals(a, x, b)
    if b_vector:
        x = x[:, 0]
        resid = resid[..., 0] if not numpy_resid or resid.shape[0] else resid
    return x, resid, rank, s


def cond(x, p=None):
    """The condition number of x in the norm p (2 by default)."""
    (x,) = _inexact("jnp.linalg.cond", x)
    if x.ndim < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D, got shape {x.shape}.")
    if p is None or p == 2:
        s = svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svd(x, compute_uv=False)
        r = s[..., -1] / s[..., 0]
    else:
        if x.shape[-1] != x.shape[-2]:
            raise ValueError(f"jnp.linalg.cond: for p={p}, array must be square; got x.shape={x.shape}")
        r = jnp.linalg.norm(x, ord=p, axis=(-2, -1)) * jnp.linalg.norm(inv(x), ord=p, axis=(-2, -1))
    return jnp.where(jnp.isnan(r) & ~jnp.isnan(x).any(axis=(-2, -1)), jnp.inf, r)


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices (the first may be a vector, and the last)."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot requires at least two arrays; got len(arrays)={len(arrays)}")
    for x in arrays:
        _check_arraylike("jnp.linalg.multi_dot", x)
    arrays = [core.asarray_value(x) for x in arrays]
    if not (arrays[0].ndim in (1, 2) and arrays[-1].ndim in (1, 2)
            and all(x.ndim == 2 for x in arrays[1:-1])):
        raise ValueError("multi_dot: input arrays must have one or two dimensions at the ends and two in "
                         f"between; got {[x.shape for x in arrays]}")
    out = arrays[0]
    for x in arrays[1:]:
        out = jnp.matmul(out, x, precision=precision)
    return out


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b."""
    a, b = _inexact("jnp.linalg.tensorsolve", a, b)
    if axes is not None:
        axes = [operator.index(ax) % a.ndim for ax in axes]
        rest = [d for d in range(a.ndim) if d not in axes]
        a = jnp.transpose(a, rest + axes)
    out_shape = a.shape[b.ndim:]
    size = int(np.prod(out_shape))
    if int(np.prod(a.shape[:b.ndim])) != size:
        raise ValueError("tensorsolve: a's leading dimensions must hold as many elements as its trailing ones; "
                         f"got a.shape={a.shape}, b.shape={b.shape}")
    return solve(a.reshape(size, size), b.reshape(size)).reshape(out_shape)


def tensorinv(a, ind: int = 2):
    """The inverse of a as an operator on its first `ind` dimensions."""
    (a,) = _inexact("jnp.linalg.tensorinv", a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got ind={ind!r}")
    in_shape, out_shape = a.shape[:ind], a.shape[ind:]
    size = int(np.prod(in_shape))
    if int(np.prod(out_shape)) != size:
        raise ValueError("tensorinv: the product of a's first ind dimensions must equal that of the rest; "
                         f"got a.shape={a.shape}, ind={ind}")
    return inv(a.reshape(size, size)).reshape(out_shape + in_shape)
