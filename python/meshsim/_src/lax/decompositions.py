"""meshsim.lax.linalg: matrix decompositions (as jax.lax.linalg).

Each binds one C++ primitive with JAX's name, params and output order
(`eigh` gives (vectors, values); `svd` binds (s, u, vt) and returns
(u, s, vh)); inputs are stacks of matrices in their last two dimensions."""
from __future__ import annotations

import numpy as np

from meshsim._src import core
from meshsim._src.lax import elementwise as lax_elementwise
from meshsim._src.lax import reduction as lax_reduction
from meshsim._src.lax import structural as lax_structural

__all__ = ["cholesky", "lu", "lu_pivots_to_permutation", "qr", "eig", "eigh", "svd", "triangular_solve",
           "symmetrize", "schur", "hessenberg", "householder_product"]


def _matrix_stack(x):
    x = core.asarray_value(x)
    return x


def _transpose_last(x):
    perm = list(range(x.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return lax_structural.transpose(x, perm)


def symmetrize(x):
    """(x + x^H) / 2 over the last two dimensions, as JAX symmetrizes inputs."""
    x = _matrix_stack(x)
    xt = _transpose_last(x)
    if np.issubdtype(x.dtype, np.complexfloating):
        xt = lax_elementwise.conj(xt)
    return lax_elementwise.div(lax_elementwise.add(x, xt), np.array(2, x.dtype))


def _lower_mask(shape, k: int = 0):
    rows = lax_structural.broadcasted_iota(np.int32, shape, len(shape) - 2)
    cols = lax_structural.broadcasted_iota(np.int32, shape, len(shape) - 1)
    return lax_elementwise.ge(lax_elementwise.add(rows, np.int32(k)), cols)


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor of each matrix; NaNs where one is not positive definite."""
    x = _matrix_stack(x)
    if symmetrize_input:
        x = symmetrize(x)
    factor = core.bind1("cholesky", x)
    zeros = lax_structural.full_like(factor, 0)
    return lax_elementwise.select(_lower_mask(factor.shape), factor, zeros)


def eig(x, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation=None, use_magma=None):
    """[eigenvalues, left eigenvectors, right eigenvectors] (those asked for) of general square
    matrices, complex (complex64 for float32), by LAPACK's geev as JAX on CPU."""
    return list(core.bind("eig", _matrix_stack(x), compute_left_eigenvectors=bool(compute_left_eigenvectors),
                          compute_right_eigenvectors=bool(compute_right_eigenvectors),
                          enable_eigvec_derivs=bool(enable_eigvec_derivs)))


def lu(x):
    """(lu, pivots, permutation): P A = L U with partial pivoting, L unit lower and U upper packed in lu."""
    return tuple(core.bind("lu", _matrix_stack(x)))


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation the row swaps `pivots` (applied in order) make of range(permutation_size)."""
    if isinstance(pivots, core.Tracer):
        return _traced_pivots_to_permutation(pivots, permutation_size)
    piv = np.asarray(pivots)
    batch = piv.shape[:-1]
    perm = np.broadcast_to(np.arange(permutation_size, dtype=np.int32), batch + (permutation_size,)).copy()
    for idx in np.ndindex(*batch):
        p = perm[idx]
        for i, j in enumerate(piv[idx]):
            p[i], p[j] = p[j], p[i]
    return core.asarray_value(perm)



def _traced_pivots_to_permutation(pivots, permutation_size: int):
    # The swaps as selects over an iota, one per pivot (their count is static), so the
    # permutation of traced pivots (lu_factor's under grad, jit or vmap) stays traced.
    batch = tuple(pivots.shape[:-1])
    last = len(batch)
    pivots = lax_elementwise.convert_element_type(pivots, np.int32)
    positions = lax_structural.broadcasted_iota(np.int32, batch + (permutation_size,), last)
    perm = positions
    for i in range(pivots.shape[-1]):
        j = lax_structural.slice_in_dim(pivots, i, i + 1, axis=last)
        at_j = lax_elementwise.eq(positions, lax_structural.broadcast_in_dim(
            j, batch + (permutation_size,), tuple(range(last + 1))))
        zeros = lax_structural.full_like(perm, 0)
        value_at_j = lax_reduction.reduce_sum(lax_elementwise.select(at_j, perm, zeros), (last,))
        value_at_i = lax_structural.slice_in_dim(perm, i, i + 1, axis=last)
        expand = tuple(range(last))
        swapped_in = lax_structural.broadcast_in_dim(value_at_j, batch + (permutation_size,), expand)
        swapped_out = lax_structural.broadcast_in_dim(value_at_i, batch + (permutation_size,), tuple(range(last + 1)))
        perm = lax_elementwise.select(lax_elementwise.eq(positions, np.int32(i)), swapped_in,
                                      lax_elementwise.select(at_j, swapped_out, perm))
    return perm

def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """(q, r) with q orthonormal columns and r upper triangular."""
    if pivoting:
        raise NotImplementedError("qr with pivoting=True is not implemented")
    q, r = core.bind("qr", _matrix_stack(x), full_matrices=bool(full_matrices), pivoting=False,
                     use_magma=use_magma)
    return q, r


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index=None):
    """(v, w): eigenvectors as columns of v and ascending eigenvalues w of symmetric matrices."""
    x = _matrix_stack(x)
    if symmetrize_input:
        x = symmetrize(x)
    v, w = core.bind("eigh", x, algorithm=None, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                     subset_by_index=subset_by_index)
    return v, w


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None, algorithm=None):
    """(u, s, vh) with singular values s descending, or s alone when compute_uv is False."""
    out = core.bind("svd", _matrix_stack(x), algorithm=None, compute_uv=bool(compute_uv),
                    full_matrices=bool(full_matrices), subset_by_index=subset_by_index)
    if not compute_uv:
        return out[0]
    s, u, vt = out
    return u, s, vt


def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False):
    """x with op(a) x = b (left_side) or x op(a) = b, a triangular."""
    a, b = core.asarray_value(a), core.asarray_value(b)
    if a.ndim < b.ndim:  # JAX broadcasts a stack of one a over b's batch
        a = lax_structural.broadcast_in_dim(a, b.shape[:b.ndim - a.ndim] + a.shape,
                                            tuple(range(b.ndim - a.ndim, b.ndim)))
    return core.bind1("triangular_solve", a, b, conjugate_a=bool(conjugate_a), left_side=bool(left_side),
                      lower=bool(lower), transpose_a=bool(transpose_a), unit_diagonal=bool(unit_diagonal))


def schur(x, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False, select_callable=None):
    """(T, Z) with x = Z T Z^H, T (quasi-)upper triangular (2x2 blocks for a real operand's
    complex pairs), by LAPACK's gees as JAX on CPU; only (T,) without the vectors."""
    del select_callable  # JAX's CPU lowering ignores it too
    out = core.bind("schur", _matrix_stack(x), compute_schur_vectors=bool(compute_schur_vectors),
                    sort_eig_vals=bool(sort_eig_vals))
    return list(out)


def hessenberg(a):
    """(a_out, taus): LAPACK gehrd's packed Hessenberg reduction, the Hessenberg form on and
    above the first subdiagonal and the Householder vectors below it, with their n - 1 factors."""
    return list(core.bind("hessenberg", _matrix_stack(a)))


def householder_product(a, taus):
    """The first n columns of the product of the Householder reflectors packed in a's columns
    (below the diagonal) with factors taus: LAPACK's orgqr/ungqr."""
    return core.bind1("householder_product", _matrix_stack(a), core.asarray_value(taus))
