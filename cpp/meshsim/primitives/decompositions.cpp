// Matrix decompositions on each device's block, by LAPACK (OpenBLAS's):
// cholesky, lu, qr, eigh, svd and triangular_solve, with JAX's names, params
// and output order. Every operand is a stack of matrices in its last two
// dimensions; leading dimensions are a batch. LAPACK is column-major, so each
// matrix is copied into a column-major scratch buffer, factored there and
// copied back: the copies are O(n^2) against the O(n^3) factorisation.
//
// The VJP rules are the adjoints of JAX's JVP rules, written with ir/ops.h so
// that they trace and differentiate again.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/lapack.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/ir/kernel_results.h"

extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork,
             int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u,
             const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork,
             int* info);
}

namespace meshsim {
namespace {

// ---- LAPACK by element type ----------------------------------------------------

struct Lapack32 {
  static void potrf(const char* u, const int* n, float* a, const int* l, int* i) { spotrf_(u, n, a, l, i); }
  static void getrf(const int* m, const int* n, float* a, const int* l, int* p, int* i) {
    sgetrf_(m, n, a, l, p, i);
  }
  static void geqrf(const int* m, const int* n, float* a, const int* l, float* t, float* w, const int* lw,
                    int* i) {
    sgeqrf_(m, n, a, l, t, w, lw, i);
  }
  static void orgqr(const int* m, const int* n, const int* k, float* a, const int* l, const float* t, float* w,
                    const int* lw, int* i) {
    sorgqr_(m, n, k, a, l, t, w, lw, i);
  }
  static void syevd(const char* j, const char* u, const int* n, float* a, const int* l, float* w, float* wk,
                    const int* lw, int* iw, const int* liw, int* i) {
    ssyevd_(j, u, n, a, l, w, wk, lw, iw, liw, i);
  }
  static void gesdd(const char* j, const int* m, const int* n, float* a, const int* l, float* s, float* u,
                    const int* lu, float* vt, const int* lvt, float* w, const int* lw, int* iw, int* i) {
    sgesdd_(j, m, n, a, l, s, u, lu, vt, lvt, w, lw, iw, i);
  }
};
struct Lapack64 {
  static void potrf(const char* u, const int* n, double* a, const int* l, int* i) { dpotrf_(u, n, a, l, i); }
  static void getrf(const int* m, const int* n, double* a, const int* l, int* p, int* i) {
    dgetrf_(m, n, a, l, p, i);
  }
  static void geqrf(const int* m, const int* n, double* a, const int* l, double* t, double* w, const int* lw,
                    int* i) {
    dgeqrf_(m, n, a, l, t, w, lw, i);
  }
  static void orgqr(const int* m, const int* n, const int* k, double* a, const int* l, const double* t,
                    double* w, const int* lw, int* i) {
    dorgqr_(m, n, k, a, l, t, w, lw, i);
  }
  static void syevd(const char* j, const char* u, const int* n, double* a, const int* l, double* w, double* wk,
                    const int* lw, int* iw, const int* liw, int* i) {
    dsyevd_(j, u, n, a, l, w, wk, lw, iw, liw, i);
  }
  static void gesdd(const char* j, const int* m, const int* n, double* a, const int* l, double* s, double* u,
                    const int* lu, double* vt, const int* lvt, double* w, const int* lw, int* iw, int* i) {
    dgesdd_(j, m, n, a, l, s, u, lu, vt, lvt, w, lw, iw, i);
  }
};
template <class T> struct LapackOf;
template <> struct LapackOf<float> : Lapack32 {};
template <> struct LapackOf<double> : Lapack64 {};

void check_matrix(const char* prim, const Aval& x, bool square) {
  if (x.ndim() < 2)
    fail<TypeError>("Input 0 to ", prim, " must have rank at least 2, but got shape=", shape_str(x.shape));
  if (!is_floating(x.dtype))
    fail<TypeError>(prim, " requires a floating-point operand, got ", dtype_name(x.dtype));
  if (square && x.shape[x.ndim() - 1] != x.shape[x.ndim() - 2])
    fail<ValueError>("The last two dimensions of the input to ", prim, " must be equal, got ",
                     shape_str(x.shape));
}

Aval matrix_aval(const Aval& in, Shape shape, DType dtype) { return like(in, std::move(shape), dtype); }

// ---- kernels -------------------------------------------------------------------------

// Lower Cholesky factor; a matrix that is not positive definite gives NaNs, as
// JAX does on CPU. The upper triangle is zero.
template <class T>
Tensor cholesky_kernel(const Tensor& x) {
  const Tensor in = x.contiguous();
  const Stack s = stack_of(in.shape());
  Tensor out = Tensor::empty(in.dtype(), in.shape());
  const int n = lapack_int(s.rows, "cholesky");
  std::vector<T> a(static_cast<size_t>(n) * n);
  for (int64_t b = 0; b < s.count; ++b) {
    const T* src = in.data<T>() + b * n * n;
    T* dst = out.data<T>() + b * n * n;
    to_colmajor(src, n, n, a.data(), n);
    int info = 0;
    if (n > 0) LapackOf<T>::potrf("L", &n, a.data(), &n, &info);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        dst[i * n + j] = info != 0 ? (j <= i ? std::numeric_limits<T>::quiet_NaN() : T(0))
                                   : (j <= i ? a[i + j * n] : T(0));
  }
  return out;
}

// P A = L U with partial pivoting: the packed factors, the row swaps (0-based)
// and the permutation they make.
template <class T>
Tensors lu_kernel(const Tensor& x) {
  const Tensor in = x.contiguous();
  const Stack s = stack_of(in.shape());
  const int m = lapack_int(s.rows, "lu"), n = lapack_int(s.cols, "lu"), k = std::min(m, n);
  Tensor lu = Tensor::empty(in.dtype(), in.shape());
  Tensor pivots = Tensor::empty(DType::Int32, with_last(in.shape(), {k}));
  Tensor perm = Tensor::empty(DType::Int32, with_last(in.shape(), {m}));
  std::vector<T> a(static_cast<size_t>(m) * n);
  std::vector<int> ipiv(std::max(k, 1));
  for (int64_t b = 0; b < s.count; ++b) {
    to_colmajor(in.data<T>() + b * m * n, m, n, a.data(), m);
    int info = 0;
    const int ld = std::max(m, 1);
    if (m > 0 && n > 0) LapackOf<T>::getrf(&m, &n, a.data(), &ld, ipiv.data(), &info);
    from_colmajor(a.data(), m, m, n, lu.data<T>() + b * m * n);
    int32_t* piv = pivots.data<int32_t>() + b * k;
    int32_t* p = perm.data<int32_t>() + b * m;
    for (int i = 0; i < m; ++i) p[i] = i;
    for (int i = 0; i < k; ++i) {
      piv[i] = ipiv[i] - 1;
      std::swap(p[i], p[piv[i]]);
    }
  }
  return {lu, pivots, perm};
}

// A = Q R by Householder reflections (geqrf, then orgqr forms Q).
template <class T>
Tensors qr_kernel(const Tensor& x, bool full_matrices) {
  const Tensor in = x.contiguous();
  const Stack s = stack_of(in.shape());
  const int m = lapack_int(s.rows, "qr"), n = lapack_int(s.cols, "qr"), k = std::min(m, n);
  const int qcols = full_matrices ? m : k, rrows = full_matrices ? m : k;
  Tensor q = Tensor::empty(in.dtype(), with_last(in.shape(), {m, qcols}));
  Tensor r = Tensor::empty(in.dtype(), with_last(in.shape(), {rrows, n}));
  const int ld = std::max(m, 1), acols = std::max(n, qcols);
  std::vector<T> a(static_cast<size_t>(ld) * std::max(acols, 1)), tau(std::max(k, 1));
  for (int64_t b = 0; b < s.count; ++b) {
    std::fill(a.begin(), a.end(), T(0));
    to_colmajor(in.data<T>() + b * m * n, m, n, a.data(), ld);
    int info = 0, lwork = -1;
    T query{};
    if (m > 0 && n > 0) {
      LapackOf<T>::geqrf(&m, &n, a.data(), &ld, tau.data(), &query, &lwork, &info);
      lwork = workspace(query);
      std::vector<T> work(lwork);
      LapackOf<T>::geqrf(&m, &n, a.data(), &ld, tau.data(), work.data(), &lwork, &info);
    }
    T* rb = r.data<T>() + b * rrows * n;
    for (int i = 0; i < rrows; ++i)
      for (int j = 0; j < n; ++j) rb[i * n + j] = j >= i && i < m ? a[i + j * ld] : T(0);
    if (m > 0) {
      if (k == 0) {  // no reflections: Q is the identity
        std::fill(a.begin(), a.end(), T(0));
        for (int i = 0; i < std::min(m, qcols); ++i) a[i + i * ld] = T(1);
      } else {
        lwork = -1;
        LapackOf<T>::orgqr(&m, &qcols, &k, a.data(), &ld, tau.data(), &query, &lwork, &info);
        lwork = workspace(query);
        std::vector<T> work(lwork);
        LapackOf<T>::orgqr(&m, &qcols, &k, a.data(), &ld, tau.data(), work.data(), &lwork, &info);
      }
    }
    from_colmajor(a.data(), ld, m, qcols, q.data<T>() + b * m * qcols);
  }
  return {q, r};
}

// Symmetric eigendecomposition from one triangle (divide and conquer):
// eigenvectors as columns, eigenvalues ascending. A failed decomposition
// gives NaNs.
template <class T>
Tensors eigh_kernel(const Tensor& x, bool lower) {
  const Tensor in = x.contiguous();
  const Stack s = stack_of(in.shape());
  const int n = lapack_int(s.rows, "eigh"), ld = std::max(n, 1);
  Tensor v = Tensor::empty(in.dtype(), in.shape());
  Tensor w = Tensor::empty(in.dtype(), with_last(in.shape(), {n}));
  std::vector<T> a(static_cast<size_t>(ld) * std::max(n, 1));
  for (int64_t b = 0; b < s.count; ++b) {
    to_colmajor(in.data<T>() + b * n * n, n, n, a.data(), ld);
    T* wb = w.data<T>() + b * n;
    int info = 0;
    if (n > 0) {
      int lwork = -1, liwork = -1, iquery = 0;
      T query{};
      LapackOf<T>::syevd("V", lower ? "L" : "U", &n, a.data(), &ld, wb, &query, &lwork, &iquery, &liwork,
                         &info);
      lwork = workspace(query);
      liwork = std::max(1, iquery);
      std::vector<T> work(lwork);
      std::vector<int> iwork(liwork);
      LapackOf<T>::syevd("V", lower ? "L" : "U", &n, a.data(), &ld, wb, work.data(), &lwork, iwork.data(),
                         &liwork, &info);
    }
    if (info != 0) {
      std::fill(a.begin(), a.end(), std::numeric_limits<T>::quiet_NaN());
      std::fill(wb, wb + n, std::numeric_limits<T>::quiet_NaN());
    }
    from_colmajor(a.data(), ld, n, n, v.data<T>() + b * n * n);
  }
  return {v, w};
}

// A = U diag(s) Vt (divide and conquer), singular values descending.
template <class T>
Tensors svd_kernel(const Tensor& x, bool full_matrices, bool compute_uv) {
  const Tensor in = x.contiguous();
  const Stack st = stack_of(in.shape());
  const int m = lapack_int(st.rows, "svd"), n = lapack_int(st.cols, "svd"), k = std::min(m, n);
  const int ucols = full_matrices ? m : k, vtrows = full_matrices ? n : k;
  Tensor s = Tensor::empty(in.dtype(), with_last(in.shape(), {k}));
  Tensor u, vt;
  if (compute_uv) {
    u = Tensor::empty(in.dtype(), with_last(in.shape(), {m, ucols}));
    vt = Tensor::empty(in.dtype(), with_last(in.shape(), {vtrows, n}));
  }
  const int lda = std::max(m, 1), ldu = std::max(m, 1), ldvt = std::max(vtrows, 1);
  std::vector<T> a(static_cast<size_t>(lda) * std::max(n, 1));
  std::vector<T> ub(compute_uv ? static_cast<size_t>(ldu) * std::max(ucols, 1) : 1);
  std::vector<T> vb(compute_uv ? static_cast<size_t>(ldvt) * std::max(n, 1) : 1);
  std::vector<int> iwork(8 * std::max(k, 1));
  const char* job = !compute_uv ? "N" : full_matrices ? "A" : "S";
  for (int64_t b = 0; b < st.count; ++b) {
    to_colmajor(in.data<T>() + b * m * n, m, n, a.data(), lda);
    T* sb = s.data<T>() + b * k;
    int info = 0;
    if (k > 0) {
      int lwork = -1;
      T query{};
      LapackOf<T>::gesdd(job, &m, &n, a.data(), &lda, sb, ub.data(), &ldu, vb.data(), &ldvt, &query, &lwork,
                         iwork.data(), &info);
      lwork = workspace(query);
      std::vector<T> work(lwork);
      LapackOf<T>::gesdd(job, &m, &n, a.data(), &lda, sb, ub.data(), &ldu, vb.data(), &ldvt, work.data(),
                         &lwork, iwork.data(), &info);
    } else if (compute_uv) {  // an empty matrix: identities of the kept sizes
      std::fill(ub.begin(), ub.end(), T(0));
      std::fill(vb.begin(), vb.end(), T(0));
      for (int i = 0; i < std::min(m, ucols); ++i) ub[i + i * ldu] = T(1);
      for (int i = 0; i < std::min(vtrows, n); ++i) vb[i + i * ldvt] = T(1);
    }
    if (info != 0) {
      std::fill(sb, sb + k, std::numeric_limits<T>::quiet_NaN());
      std::fill(ub.begin(), ub.end(), std::numeric_limits<T>::quiet_NaN());
      std::fill(vb.begin(), vb.end(), std::numeric_limits<T>::quiet_NaN());
    }
    if (compute_uv) {
      from_colmajor(ub.data(), ldu, m, ucols, u.data<T>() + b * m * ucols);
      from_colmajor(vb.data(), ldvt, vtrows, n, vt.data<T>() + b * vtrows * n);
    }
  }
  if (!compute_uv) return {s};
  return {s, u, vt};
}

// op(a) x = b (left_side) or x op(a) = b, a triangular; op transposes when
// transpose_a. cblas reads row-major directly.
template <class T>
Tensor triangular_solve_kernel(const Tensor& a_in, const Tensor& b_in, const Params& p) {
  const Tensor a = a_in.contiguous();
  Tensor x = b_in.copy();
  const Stack sa = stack_of(a.shape()), sb = stack_of(x.shape());
  const bool left = p.get<bool>("left_side"), lower = p.get<bool>("lower");
  const bool trans = p.get<bool>("transpose_a"), unit = p.get<bool>("unit_diagonal");
  const int64_t n = sa.rows, rows = sb.rows, cols = sb.cols;
  if (rows == 0 || cols == 0) return x;
  for (int64_t b = 0; b < sb.count; ++b) {
    const T* ab = a.data<T>() + b * n * n;
    T* xb = x.data<T>() + b * rows * cols;
    const auto side = left ? CblasLeft : CblasRight;
    const auto uplo = lower ? CblasLower : CblasUpper;
    const auto op = trans ? CblasTrans : CblasNoTrans;
    const auto diag = unit ? CblasUnit : CblasNonUnit;
    if constexpr (std::is_same_v<T, float>)
      cblas_strsm(CblasRowMajor, side, uplo, op, diag, rows, cols, 1.0f, ab, n, xb, cols);
    else
      cblas_dtrsm(CblasRowMajor, side, uplo, op, diag, rows, cols, 1.0, ab, n, xb, cols);
  }
  return x;
}

// ---- ops used by the rules --------------------------------------------------------------

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
Value tril(const Value& x, int64_t k = 0) {
  const Aval a = aval_of(x);
  return ops::select(band_mask(a, k, true), x, ops::zeros_like(x));
}
Value triu(const Value& x, int64_t k = 0) {
  const Aval a = aval_of(x);
  return ops::select(band_mask(a, k, false), x, ops::zeros_like(x));
}

Value solve_triangular(const Value& a, const Value& b, bool left, bool lower, bool transpose_a,
                       bool unit_diagonal = false) {
  return ops::bind1("triangular_solve", {a, b},
                    {{"left_side", left}, {"lower", lower}, {"transpose_a", transpose_a},
                     {"conjugate_a", false}, {"unit_diagonal", unit_diagonal}});
}

// True on the diagonal of each matrix of a stack shaped like `a`.
Value identity_mask(const Aval& a) {
  const int64_t r = a.ndim();
  return ops::eq(ops::iota(DType::Int32, a.shape, r - 2), ops::iota(DType::Int32, a.shape, r - 1));
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

// ---- VJP rules ---------------------------------------------------------------------------

// L = chol(A) reads A as symmetric: dL = L Phi(L^-1 dA L^-T), Phi = lower
// triangle with half the diagonal. Adjoint: sym(L^-T Phi(L^T Lbar) L^-1).
Cotangents cholesky_vjp(const VjpArgs& a) {
  const Value& L = a.out[0];
  const Value P = tril(matmul(mT(L), *a.ct[0]));
  const Value phi = ops::select(identity_mask(aval_of(P)), ops::mul(P, ops::full_like(P, 0.5)), P);
  const Value left = solve_triangular(L, phi, true, true, true);
  const Value s = mT(solve_triangular(L, mT(left), true, true, true));
  return {ops::mul(ops::add(s, mT(s)), ops::full_like(s, 0.5))};
}

// Left: op(A) X = B; right: X op(A) = B. G solves the transposed system on
// the cotangent; A's cotangent is -G X^T (or its variants) on A's triangle.
Cotangents triangular_solve_vjp(const VjpArgs& a) {
  const Params& p = a.params;
  const bool left = p.get<bool>("left_side"), lower = p.get<bool>("lower");
  const bool trans = p.get<bool>("transpose_a"), unit = p.get<bool>("unit_diagonal");
  const Value& A = a.in[0];
  const Value g = solve_triangular(A, *a.ct[0], left, lower, !trans, unit);
  Cotangents ct(2);
  if (a.wants[1]) ct[1] = g;
  if (a.wants[0]) {
    const Value& x = a.out[0];
    Value abar = left ? (trans ? matmul(x, mT(g)) : matmul(g, mT(x)))
                      : (trans ? matmul(mT(g), x) : matmul(mT(x), g));
    abar = ops::neg(abar);
    abar = lower ? tril(abar, unit ? -1 : 0) : triu(abar, unit ? 1 : 0);
    ct[0] = abar;
  }
  return ct;
}

// A = P L U: with M = tril(L^T Lbar, -1) + triu(Ubar U^T),
// Abar = P L^-T M U^-T (square matrices).
Cotangents lu_vjp(const VjpArgs& a) {
  const Aval x = aval_of(a.in[0]);
  const int64_t r = x.ndim();
  if (x.shape[r - 1] != x.shape[r - 2])
    fail<NotImplementedError>("Differentiation of lu is implemented for square matrices only, got shape ",
                              shape_str(x.shape));
  if (!a.ct[0]) return Cotangents(1);
  const Value& lu = a.out[0];
  const Value ct = *a.ct[0];
  const Value eye = ops::convert(ops::eq(ops::iota(DType::Int32, x.shape, r - 2),
                                         ops::iota(DType::Int32, x.shape, r - 1)), x.dtype);
  const Value L = ops::add(tril(lu, -1), eye);
  const Value U = triu(lu);
  const Value M = ops::add(tril(matmul(mT(L), ct), -1), triu(matmul(ct, mT(U))));
  const Value y = solve_triangular(U, solve_triangular(L, M, true, true, true, true), false, false, true);
  // P[r, i] = (perm[i] == r): row i of L U is row perm[i] of A.
  const Aval pa = aval_of(a.out[2]);
  IntList dims;
  for (int64_t d = 0; d + 1 < pa.ndim(); ++d) dims.push_back(d);
  dims.push_back(r - 1);
  const Value perm = ops::broadcast_in_dim(a.out[2], x.shape, dims);
  const Value P = ops::convert(ops::eq(perm, ops::iota(DType::Int32, x.shape, r - 2)), x.dtype);
  return {matmul(P, y)};
}

// Reduced QR with m >= n. With M = Rbar R^T - Q^T Qbar and
// N = M - tril(M - M^T, -1): Abar = (Q N + Qbar) R^-T.
Cotangents qr_vjp(const VjpArgs& a) {
  const Aval x = aval_of(a.in[0]);
  const int64_t m = x.shape[x.ndim() - 2], n = x.shape[x.ndim() - 1];
  if (m < n || (a.params.get<bool>("full_matrices") && m != n))
    fail<NotImplementedError>("Unimplemented case of QR decomposition derivative");
  const Value &Q = a.out[0], &R = a.out[1];
  const Value qbar = ops::instantiate(a.ct[0], aval_of(Q));
  const Value rbar = ops::instantiate(a.ct[1], aval_of(R));
  const Value M = ops::sub(matmul(rbar, mT(R)), matmul(mT(Q), qbar));
  const Value N = ops::sub(M, tril(ops::sub(M, mT(M)), -1));
  return {solve_triangular(R, ops::add(matmul(Q, N), qbar), false, false, true)};
}

// A = V diag(w) V^T: Abar = V (diag(wbar) + F o (V^T Vbar)) V^T.
Cotangents eigh_vjp(const VjpArgs& a) {
  const Value &V = a.out[0], &w = a.out[1];
  Value inner = ops::zeros(aval_of(V));
  if (a.ct[0]) inner = ops::mul(inverse_gaps(w), matmul(mT(V), *a.ct[0]));
  if (a.ct[1]) inner = ops::add(inner, diag_embed(*a.ct[1]));
  return {matmul(V, matmul(inner, mT(V)))};
}

// Reduced SVD A = U S Vt (see docs/architecture.md for the derivation):
// Abar = U C V^T + (I - U U^T) Ubar S^-1 V^T + U S^-1 Vbar^T (I - V V^T),
// C = diag(sbar) + (Gu + Gu^T) S + S (Gv + Gv^T), Gu = F o U^T Ubar, Gv = F o V^T Vbar,
// F[i, j] = 1 / (s_j^2 - s_i^2).
Cotangents svd_vjp(const VjpArgs& a) {
  const Params& p = a.params;
  const bool compute_uv = p.get<bool>("compute_uv");
  if (compute_uv && p.get<bool>("full_matrices"))
    fail<NotImplementedError>("Singular value decomposition JVP not implemented for full matrices");
  Values usv = a.out;
  if (!compute_uv) {
    Params q = p;
    q.set("compute_uv", true);
    q.set("full_matrices", false);
    usv = meshsim::bind(primitive("svd"), {a.in[0]}, q);
  }
  const Value &s = usv[0], &U = usv[1], V = mT(usv[2]);
  const Value S = diag_embed(s);
  Value C = a.ct[0] ? diag_embed(*a.ct[0]) : ops::zeros(aval_of(S));
  const bool ubar = compute_uv && a.ct[1], vbar = compute_uv && a.ct[2];
  if (!ubar && !vbar) return {matmul(U, matmul(C, mT(V)))};
  const Value F = inverse_gaps(ops::mul(s, s));
  const Value s_inv = ops::div(ops::full_like(s, 1.0), s);
  // x S^-1 for a stack x whose last dimension runs over the singular values.
  auto times_s_inv = [&](const Value& x) {
    const Aval xa = aval_of(x);
    return ops::mul(x, along_rows(s_inv, xa.shape[xa.ndim() - 2]));
  };
  Values extra;
  if (ubar) {
    const Value& g = *a.ct[1];
    const Value Gu = ops::mul(F, matmul(mT(U), g));
    C = ops::add(C, matmul(ops::add(Gu, mT(Gu)), S));
    const Value outside = ops::sub(g, matmul(U, matmul(mT(U), g)));  // (I - U U^T) Ubar
    extra.push_back(matmul(times_s_inv(outside), mT(V)));
  }
  if (vbar) {
    const Value g = mT(*a.ct[2]);
    const Value Gv = ops::mul(F, matmul(mT(V), g));
    C = ops::add(C, matmul(S, ops::add(Gv, mT(Gv))));
    const Value outside = ops::sub(g, matmul(V, matmul(mT(V), g)));  // (I - V V^T) Vbar
    extra.push_back(matmul(U, mT(times_s_inv(outside))));
  }
  Value abar = matmul(U, matmul(C, mT(V)));
  for (const Value& e : extra) abar = ops::add(abar, e);
  return {abar};
}

// ---- registration -------------------------------------------------------------------------

double cube(int64_t n) { return static_cast<double>(n) * n * n; }

Cost flops_cost(const Avals& in, const Avals& out, double per_matrix) {
  Cost c = memory_cost(in, out);
  c.flops = per_matrix * static_cast<double>(stack_of(in[0].shape).count);
  return c;
}

Batched batch_leading(const BatchArgs& a) { return bind_at_front(a, a.params); }

void add(Primitive p) {
  p.batch = batch_leading;
  register_primitive(std::move(p));
}

}  // namespace

void register_decomposition_primitives() {
  {
    Primitive p;
    p.name = "cholesky";
    p.abstract_eval = [](const Avals& in, const Params&) {
      check_matrix("cholesky", in[0], true);
      return Avals{matrix_aval(in[0], in[0].shape, in[0].dtype)};
    };
    p.kernel = [](const Tensors& in, const Params&, const Avals&) {
      return as_tensors(dispatch_wide_float(in[0].dtype(), [&](auto t) { return cholesky_kernel<decltype(t)>(in[0]); }));
    };
    p.vjp = cholesky_vjp;
    p.cost = [](const Avals& in, const Params&, const Avals& out) {
      return flops_cost(in, out, cube(in[0].shape.back()) / 3);
    };
    add(std::move(p));
  }
  {
    Primitive p;
    p.name = "lu";
    p.abstract_eval = [](const Avals& in, const Params&) {
      check_matrix("lu", in[0], false);
      const Aval& x = in[0];
      const int64_t m = x.shape[x.ndim() - 2], n = x.shape[x.ndim() - 1];
      return Avals{matrix_aval(x, x.shape, x.dtype),
                   matrix_aval(x, with_last(x.shape, {std::min(m, n)}), DType::Int32),
                   matrix_aval(x, with_last(x.shape, {m}), DType::Int32)};
    };
    p.kernel = [](const Tensors& in, const Params&, const Avals&) {
      return dispatch_wide_float(in[0].dtype(), [&](auto t) { return lu_kernel<decltype(t)>(in[0]); });
    };
    p.vjp = lu_vjp;
    p.cost = [](const Avals& in, const Params&, const Avals& out) {
      const Stack s = stack_of(in[0].shape);
      const double m = s.rows, n = s.cols, k = std::min(m, n);
      return flops_cost(in, out, m * n * k - (m + n) * k * k / 2 + k * k * k / 3);
    };
    add(std::move(p));
  }
  {
    Primitive p;
    p.name = "qr";
    p.abstract_eval = [](const Avals& in, const Params& params) {
      check_matrix("qr", in[0], false);
      if (params.get_or<bool>("pivoting", false))
        fail<NotImplementedError>("qr with pivoting=True is not implemented");
      const Aval& x = in[0];
      const int64_t m = x.shape[x.ndim() - 2], n = x.shape[x.ndim() - 1], k = std::min(m, n);
      const bool full = params.get<bool>("full_matrices");
      return Avals{matrix_aval(x, with_last(x.shape, {m, full ? m : k}), x.dtype),
                   matrix_aval(x, with_last(x.shape, {full ? m : k, n}), x.dtype)};
    };
    p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
      return dispatch_wide_float(in[0].dtype(), [&](auto t) {
        return qr_kernel<decltype(t)>(in[0], params.get<bool>("full_matrices"));
      });
    };
    p.vjp = qr_vjp;
    p.cost = [](const Avals& in, const Params&, const Avals& out) {
      const Stack s = stack_of(in[0].shape);
      const double m = s.rows, n = s.cols, k = std::min(m, n);
      return flops_cost(in, out, 2 * (2 * m * n * k - (m + n) * k * k + 2 * k * k * k / 3));
    };
    add(std::move(p));
  }
  {
    Primitive p;
    p.name = "eigh";
    p.abstract_eval = [](const Avals& in, const Params& params) {
      check_matrix("eigh", in[0], true);
      if (!params.is_none("subset_by_index"))
        fail<NotImplementedError>("eigh with subset_by_index is not implemented");
      const Aval& x = in[0];
      return Avals{matrix_aval(x, x.shape, x.dtype), matrix_aval(x, with_last(x.shape, {x.shape.back()}), x.dtype)};
    };
    p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
      return dispatch_wide_float(in[0].dtype(), [&](auto t) {
        return eigh_kernel<decltype(t)>(in[0], params.get<bool>("lower"));
      });
    };
    p.vjp = eigh_vjp;
    p.cost = [](const Avals& in, const Params&, const Avals& out) {
      return flops_cost(in, out, 9 * cube(in[0].shape.back()));
    };
    add(std::move(p));
  }
  {
    Primitive p;
    p.name = "svd";
    p.abstract_eval = [](const Avals& in, const Params& params) {
      check_matrix("svd", in[0], false);
      if (!params.is_none("subset_by_index"))
        fail<NotImplementedError>("svd with subset_by_index is not implemented");
      const Aval& x = in[0];
      const int64_t m = x.shape[x.ndim() - 2], n = x.shape[x.ndim() - 1], k = std::min(m, n);
      const bool full = params.get<bool>("full_matrices");
      Avals out{matrix_aval(x, with_last(x.shape, {k}), x.dtype)};
      if (params.get<bool>("compute_uv")) {
        out.push_back(matrix_aval(x, with_last(x.shape, {m, full ? m : k}), x.dtype));
        out.push_back(matrix_aval(x, with_last(x.shape, {full ? n : k, n}), x.dtype));
      }
      return out;
    };
    p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
      return dispatch_wide_float(in[0].dtype(), [&](auto t) {
        return svd_kernel<decltype(t)>(in[0], params.get<bool>("full_matrices"), params.get<bool>("compute_uv"));
      });
    };
    p.vjp = svd_vjp;
    p.cost = [](const Avals& in, const Params&, const Avals& out) {
      const Stack s = stack_of(in[0].shape);
      const double m = std::max(s.rows, s.cols), k = std::min(s.rows, s.cols);
      return flops_cost(in, out, 4 * m * k * k + 8 * k * k * k);
    };
    add(std::move(p));
  }
  {
    Primitive p;
    p.name = "triangular_solve";
    p.abstract_eval = [](const Avals& in, const Params& params) {
      const Aval &a = in[0], &b = in[1];
      if (a.ndim() < 2 || a.shape[a.ndim() - 1] != a.shape[a.ndim() - 2])
        fail<ValueError>("The first input to triangular_solve must be a square matrix. Got shape ",
                         shape_str(a.shape), ".");
      if (b.ndim() != a.ndim())
        fail<ValueError>("The arguments to triangular_solve must have the same number of dimensions, got ",
                         a.ndim(), " and ", b.ndim(), ".");
      for (int64_t d = 0; d + 2 < a.ndim(); ++d)
        if (a.shape[d] != b.shape[d])
          fail<ValueError>("The leading batch dimensions of the arguments to triangular_solve must be equal, "
                           "got shapes ", shape_str(a.shape), " and ", shape_str(b.shape), ".");
      const int64_t n = a.shape.back();
      const int64_t common = params.get<bool>("left_side") ? b.shape[b.ndim() - 2] : b.shape.back();
      if (common != n)
        fail<ValueError>("Incompatible shapes for arguments to triangular_solve: ", shape_str(a.shape), " and ",
                         shape_str(b.shape), ".");
      if (a.dtype != b.dtype || !is_floating(a.dtype))
        fail<TypeError>("triangular_solve requires floating-point operands of one dtype, got ",
                        dtype_name(a.dtype), " and ", dtype_name(b.dtype));
      return Avals{like(b, b.shape, b.dtype)};
    };
    p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
      return as_tensors(dispatch_wide_float(in[0].dtype(), [&](auto t) {
        return triangular_solve_kernel<decltype(t)>(in[0], in[1], params);
      }));
    };
    p.vjp = triangular_solve_vjp;
    p.cost = [](const Avals& in, const Params&, const Avals& out) {
      const Stack s = stack_of(in[1].shape);
      return flops_cost(in, out, static_cast<double>(s.rows) * s.cols * in[0].shape.back());
    };
    add(std::move(p));
  }
  register_eig_primitive();
}

}  // namespace meshsim
