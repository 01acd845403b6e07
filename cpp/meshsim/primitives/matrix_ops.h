// Matrix-stack ops for the decompositions' VJP rules (decompositions.cpp,
// eig.cpp): products, transposes, triangles and solves over the last two
// dimensions, as ir/ops.h values that trace and differentiate again.
#pragma once
#include <cstdint>

#include "meshsim/ir/primitive.h"

namespace meshsim::matrix_ops {

int64_t rank_of(const Value& v);

// Batched matrix product over the last two dimensions.
Value matmul(const Value& x, const Value& y);

// The last two dimensions swapped.
Value mT(const Value& x);

// A mask of a matrix stack's shape: element (i, j) with j - i <= k (lower) or >= k (upper).
Value band_mask(const Aval& like, int64_t k, bool lower);
Value tril(const Value& x, int64_t k = 0);
Value triu(const Value& x, int64_t k = 0);

Value solve_triangular(const Value& a, const Value& b, bool left, bool lower, bool transpose_a,
                       bool unit_diagonal = false, bool conjugate_a = false);

// True on the diagonal of each matrix of a stack shaped like `a`.
Value identity_mask(const Aval& a);

bool complex_valued(const Value& x);

// The complex conjugate (nothing for real values, so real programs trace no conj).
Value conj(const Value& x);
// The conjugate transpose of a matrix stack.
Value mH(const Value& x);
// x solved against a's conjugate transpose (its transpose when real), a triangular.
Value solve_adjoint(const Value& a, const Value& x, bool left, bool lower);
// Real x as values of `like`'s (possibly complex) dtype.
Value as_dtype_of(const Value& x, const Value& like);
// i Im(x) on the diagonal of a complex stack x, zero elsewhere.
Value imaginary_diagonal(const Value& x);

// Vector (..., n) as the diagonal of a (..., n, n) stack.
Value diag_embed(const Value& v);
// (..., n) broadcast along rows: element (i, j) is v[j].
Value along_rows(const Value& v, int64_t rows);
// The permutation matrix P of lu's `permutation` output (..., m) for a stack shaped like
// `like`: P[r, i] = (perm[i] == r), so that A = P L U.
Value permutation_matrix(const Value& perm, const Aval& like);
// F[i, j] = 1 / (d[j] - d[i]) off the diagonal, 0 on it (JAX's eigh/svd JVP matrix).
Value inverse_gaps(const Value& d);

}  // namespace meshsim::matrix_ops
