// The matrix-stack ops of matrix_ops.h.
#include "meshsim/primitives/matrix_ops.h"

#include <utility>

#include "meshsim/ir/ops.h"

namespace meshsim::matrix_ops {

int64_t rank_of(const Value& v) { return aval_of(v).ndim(); }

// Batched matrix product over the last two dimensions.
Value matmul(const Value& x, const Value& y) {
  const int64_t r = rank_of(x);
  IntList batch;
  for (int64_t d = 0; d + 2 < r; ++d) batch.push_back(d);
  return ops::dot_general(x, y, {{r - 1}, {r - 2}, batch, batch});
}

// The last two dimensions swapped.
Value mT(const Value& x) {
  const int64_t r = rank_of(x);
  IntList perm;
  for (int64_t d = 0; d < r; ++d) perm.push_back(d);
  std::swap(perm[r - 1], perm[r - 2]);
  return ops::transpose(x, perm);
}

// A mask of a matrix stack's shape: element (i, j) with j - i <= k (lower) or >= k (upper).
Value band_mask(const Aval& like, int64_t k, bool lower) {
  const int64_t r = like.ndim();
  const Value i = ops::iota(DType::Int32, like.shape, r - 2);
  const Value j = ops::iota(DType::Int32, like.shape, r - 1);
  const Value diff = ops::sub(j, i);
  const Value kk = ops::full(like.shape, DType::Int32, static_cast<double>(k));
  return lower ? ops::le(diff, kk) : ops::ge(diff, kk);
}
Value tril(const Value& x, int64_t k) {
  const Aval a = aval_of(x);
  return ops::select(band_mask(a, k, true), x, ops::zeros_like(x));
}
Value triu(const Value& x, int64_t k) {
  const Aval a = aval_of(x);
  return ops::select(band_mask(a, k, false), x, ops::zeros_like(x));
}

Value solve_triangular(const Value& a, const Value& b, bool left, bool lower, bool transpose_a,
                       bool unit_diagonal, bool conjugate_a) {
  return ops::bind1("triangular_solve", {a, b},
                    {{"left_side", left}, {"lower", lower}, {"transpose_a", transpose_a},
                     {"conjugate_a", conjugate_a}, {"unit_diagonal", unit_diagonal}});
}

// True on the diagonal of each matrix of a stack shaped like `a`.
Value identity_mask(const Aval& a) {
  const int64_t r = a.ndim();
  return ops::eq(ops::iota(DType::Int32, a.shape, r - 2), ops::iota(DType::Int32, a.shape, r - 1));
}

bool complex_valued(const Value& x) { return is_complex(aval_of(x).dtype); }

// The complex conjugate (nothing for real values, so real programs trace no conj).
Value conj(const Value& x) {
  return complex_valued(x) ? ops::bind1("conj", {x}, {{"input_dtype", aval_of(x).dtype}}) : x;
}
// The conjugate transpose of a matrix stack.
Value mH(const Value& x) { return conj(mT(x)); }
// x solved against a's conjugate transpose (its transpose when real), a triangular.
Value solve_adjoint(const Value& a, const Value& x, bool left, bool lower) {
  return solve_triangular(a, x, left, lower, true, false, complex_valued(a));
}
// Real x as values of `like`'s (possibly complex) dtype.
Value as_dtype_of(const Value& x, const Value& like) {
  const DType dt = aval_of(like).dtype;
  return aval_of(x).dtype == dt ? x : ops::convert(x, dt);
}
// i Im(x) on the diagonal of a complex stack x, zero elsewhere.
Value imaginary_diagonal(const Value& x) {
  const Value im = ops::sub(x, as_dtype_of(ops::bind1("real", {x}), x));
  return ops::select(identity_mask(aval_of(x)), im, ops::zeros_like(x));
}

// Vector (..., n) as the diagonal of a (..., n, n) stack.
Value diag_embed(const Value& v) {
  const Aval a = aval_of(v);
  Shape shape = a.shape;
  shape.push_back(a.shape.back());
  IntList dims;
  for (int64_t d = 0; d < a.ndim(); ++d) dims.push_back(d);
  const Value row = ops::broadcast_in_dim(v, shape, dims);
  return ops::select(identity_mask(aval_of(row)), row, ops::zeros_like(row));
}
// (..., n) broadcast along rows: element (i, j) is v[j].
Value along_rows(const Value& v, int64_t rows) {
  const Aval a = aval_of(v);
  Shape shape(a.shape.begin(), a.shape.end() - 1);
  shape.push_back(rows);
  shape.push_back(a.shape.back());
  IntList dims;
  for (int64_t d = 0; d + 1 < a.ndim(); ++d) dims.push_back(d);
  dims.push_back(a.ndim());
  return ops::broadcast_in_dim(v, shape, dims);
}
// F[i, j] = 1 / (d[j] - d[i]) off the diagonal, 0 on it (JAX's eigh/svd JVP matrix).
Value inverse_gaps(const Value& d) {
  const int64_t n = aval_of(d).shape.back();
  const Value dj = along_rows(d, n);
  const Value gaps = ops::sub(dj, mT(dj));
  const Value eye = identity_mask(aval_of(gaps));
  const Value one = ops::full_like(gaps, 1.0);
  return ops::select(eye, ops::zeros_like(gaps), ops::div(one, ops::select(eye, one, gaps)));
}

Value permutation_matrix(const Value& perm, const Aval& like) {
  const int64_t r = like.ndim();
  IntList dims;
  for (int64_t d = 0; d + 2 < r; ++d) dims.push_back(d);
  dims.push_back(r - 1);
  const Value columns = ops::broadcast_in_dim(perm, like.shape, dims);
  return ops::convert(ops::eq(columns, ops::iota(DType::Int32, like.shape, r - 2)), like.dtype);
}

}  // namespace meshsim::matrix_ops
