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
#include <complex>
#include <limits>
#include <vector>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/lapack.h"
#include "meshsim/primitives/lapack_routines.h"
#include "meshsim/primitives/matrix_ops.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {

template <class T>
T nan_of() {
  return T(std::numeric_limits<lapack::real_of<T>>::quiet_NaN());
}

void check_matrix(const char* prim, const Aval& x, bool square) {
  if (x.ndim() < 2)
    fail<TypeError>("Input 0 to ", prim, " must have rank at least 2, but got shape=", shape_str(x.shape));
  if (!is_inexact(x.dtype))
    fail<TypeError>(prim, " requires a floating-point or complex operand, got ", dtype_name(x.dtype));
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
    if (n > 0) lapack::potrf(&n, a.data(), &info);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        dst[i * n + j] = info != 0 ? (j <= i ? nan_of<T>() : T(0))
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
    if (m > 0 && n > 0) lapack::getrf(&m, &n, a.data(), &ld, ipiv.data(), &info);
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
      lapack::geqrf(&m, &n, a.data(), &ld, tau.data(), &query, &lwork, &info);
      lwork = workspace(std::real(query));
      std::vector<T> work(lwork);
      lapack::geqrf(&m, &n, a.data(), &ld, tau.data(), work.data(), &lwork, &info);
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
        lapack::ungqr(&m, &qcols, &k, a.data(), &ld, tau.data(), &query, &lwork, &info);
        lwork = workspace(std::real(query));
        std::vector<T> work(lwork);
        lapack::ungqr(&m, &qcols, &k, a.data(), &ld, tau.data(), work.data(), &lwork, &info);
      }
    }
    from_colmajor(a.data(), ld, m, qcols, q.data<T>() + b * m * qcols);
  }
  return {q, r};
}

// Hermitian (symmetric) eigendecomposition from one triangle (divide and
// conquer): eigenvectors as columns, real eigenvalues ascending. A failed
// decomposition gives NaNs.
template <class T>
Tensors eigh_kernel(const Tensor& x, bool lower) {
  using R = lapack::real_of<T>;
  const Tensor in = x.contiguous();
  const Stack s = stack_of(in.shape());
  const int n = lapack_int(s.rows, "eigh"), ld = std::max(n, 1);
  Tensor v = Tensor::empty(in.dtype(), in.shape());
  Tensor w = Tensor::empty(real_dtype(in.dtype()), with_last(in.shape(), {n}));
  std::vector<T> a(static_cast<size_t>(ld) * std::max(n, 1));
  for (int64_t b = 0; b < s.count; ++b) {
    to_colmajor(in.data<T>() + b * n * n, n, n, a.data(), ld);
    R* wb = w.data<R>() + b * n;
    const int info = n > 0 ? lapack::heevd(lower, n, a.data(), wb) : 0;
    if (info != 0) {
      std::fill(a.begin(), a.end(), nan_of<T>());
      std::fill(wb, wb + n, nan_of<R>());
    }
    from_colmajor(a.data(), ld, n, n, v.data<T>() + b * n * n);
  }
  return {v, w};
}

// A = U diag(s) Vt (divide and conquer), singular values descending.
template <class T>
Tensors svd_kernel(const Tensor& x, bool full_matrices, bool compute_uv) {
  using R = lapack::real_of<T>;
  const Tensor in = x.contiguous();
  const Stack st = stack_of(in.shape());
  const int m = lapack_int(st.rows, "svd"), n = lapack_int(st.cols, "svd"), k = std::min(m, n);
  const int ucols = full_matrices ? m : k, vtrows = full_matrices ? n : k;
  Tensor s = Tensor::empty(real_dtype(in.dtype()), with_last(in.shape(), {k}));
  Tensor u, vt;
  if (compute_uv) {
    u = Tensor::empty(in.dtype(), with_last(in.shape(), {m, ucols}));
    vt = Tensor::empty(in.dtype(), with_last(in.shape(), {vtrows, n}));
  }
  const int lda = std::max(m, 1), ldu = std::max(m, 1), ldvt = std::max(vtrows, 1);
  std::vector<T> a(static_cast<size_t>(lda) * std::max(n, 1));
  std::vector<T> ub(compute_uv ? static_cast<size_t>(ldu) * std::max(ucols, 1) : 1);
  std::vector<T> vb(compute_uv ? static_cast<size_t>(ldvt) * std::max(n, 1) : 1);
  const char* job = !compute_uv ? "N" : full_matrices ? "A" : "S";
  for (int64_t b = 0; b < st.count; ++b) {
    to_colmajor(in.data<T>() + b * m * n, m, n, a.data(), lda);
    R* sb = s.data<R>() + b * k;
    int info = 0;
    if (k > 0) {
      info = lapack::gesdd(job, m, n, a.data(), lda, sb, ub.data(), ldu, vb.data(), ldvt);
    } else if (compute_uv) {  // an empty matrix: identities of the kept sizes
      std::fill(ub.begin(), ub.end(), T(0));
      std::fill(vb.begin(), vb.end(), T(0));
      for (int i = 0; i < std::min(m, ucols); ++i) ub[i + i * ldu] = T(1);
      for (int i = 0; i < std::min(vtrows, n); ++i) vb[i + i * ldvt] = T(1);
    }
    if (info != 0) {
      std::fill(sb, sb + k, nan_of<R>());
      std::fill(ub.begin(), ub.end(), nan_of<T>());
      std::fill(vb.begin(), vb.end(), nan_of<T>());
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
// transpose_a and conjugates when conjugate_a (complex a). cblas reads
// row-major directly; it has no conjugate-without-transpose, so that case
// solves with a conjugated copy of a.
template <class T>
Tensor triangular_solve_kernel(const Tensor& a_in, const Tensor& b_in, const Params& p) {
  Tensor a = a_in.contiguous();
  Tensor x = b_in.copy();
  const Stack sa = stack_of(a.shape()), sb = stack_of(x.shape());
  const bool left = p.get<bool>("left_side"), lower = p.get<bool>("lower");
  const bool trans = p.get<bool>("transpose_a"), unit = p.get<bool>("unit_diagonal");
  const bool conj = !std::is_same_v<T, lapack::real_of<T>> && p.get_or<bool>("conjugate_a", false);
  const int64_t n = sa.rows, rows = sb.rows, cols = sb.cols;
  if (rows == 0 || cols == 0) return x;
  if constexpr (!std::is_same_v<T, lapack::real_of<T>>) {
    if (conj && !trans) {
      a = a.copy();
      T* d = a.data<T>();
      for (int64_t i = 0; i < sa.count * n * n; ++i) d[i] = std::conj(d[i]);
    }
  }
  const auto side = left ? CblasLeft : CblasRight;
  const auto uplo = lower ? CblasLower : CblasUpper;
  const auto op = !trans ? CblasNoTrans : conj ? CblasConjTrans : CblasTrans;
  const auto diag = unit ? CblasUnit : CblasNonUnit;
  for (int64_t b = 0; b < sb.count; ++b) {
    const T* ab = a.data<T>() + b * n * n;
    T* xb = x.data<T>() + b * rows * cols;
    if constexpr (std::is_same_v<T, float>) {
      cblas_strsm(CblasRowMajor, side, uplo, op, diag, rows, cols, 1.0f, ab, n, xb, cols);
    } else if constexpr (std::is_same_v<T, double>) {
      cblas_dtrsm(CblasRowMajor, side, uplo, op, diag, rows, cols, 1.0, ab, n, xb, cols);
    } else {
      const T one(1);
      if constexpr (std::is_same_v<T, complex64>)
        cblas_ctrsm(CblasRowMajor, side, uplo, op, diag, rows, cols, &one, ab, n, xb, cols);
      else
        cblas_ztrsm(CblasRowMajor, side, uplo, op, diag, rows, cols, &one, ab, n, xb, cols);
    }
  }
  return x;
}

using namespace matrix_ops;  // NOLINT: the rules below are written in these ops

// ---- VJP rules ---------------------------------------------------------------------------
//
// For complex operands a VJP is the transpose of the JVP (JAX's convention,
// no conjugation), which is conj(adjoint(conj(cotangent))) with the adjoint
// taken for the real inner product Re tr(X^H Y): the rules below are written
// as adjoints (with ^H, which is ^T for real values) between two conj calls.

// L = chol(A): dL = L Phi(L^-1 dA L^-H), Phi = lower triangle with half the
// diagonal, over the whole of dA as JAX's rule (lax.linalg.cholesky makes the
// operand Hermitian before, when asked). Adjoint: L^-H Phi(L^H Lbar) L^-1.
Cotangents cholesky_vjp(const VjpArgs& a) {
  const Value& L = a.out[0];
  const Value P = tril(matmul(mH(L), conj(*a.ct[0])));
  const Value phi = ops::select(identity_mask(aval_of(P)), ops::mul(P, ops::full_like(P, 0.5)), P);
  const Value left = solve_adjoint(L, phi, true, true);
  return {conj(mH(solve_adjoint(L, mH(left), true, true)))};
}

// Left: op(A) X = B; right: X op(A) = B, op transposing and/or conjugating.
// The JVP is linear in (dA, dB) without conjugation, so its transpose is
// direct: G solves the transposed system on the cotangent; A's cotangent is
// op applied to -G X^T (left) or -X^T G (right), on A's triangle.
Cotangents triangular_solve_vjp(const VjpArgs& a) {
  const Params& p = a.params;
  const bool left = p.get<bool>("left_side"), lower = p.get<bool>("lower");
  const bool trans = p.get<bool>("transpose_a"), unit = p.get<bool>("unit_diagonal");
  const bool conjugated = p.get_or<bool>("conjugate_a", false);
  const Value& A = a.in[0];
  const Value g = solve_triangular(A, *a.ct[0], left, lower, !trans, unit, conjugated);
  Cotangents ct(2);
  if (a.wants[1]) ct[1] = g;
  if (a.wants[0]) {
    const Value& x = a.out[0];
    Value abar = ops::neg(left ? matmul(g, mT(x)) : matmul(mT(x), g));
    if (trans) abar = mT(abar);
    if (conjugated) abar = conj(abar);
    ct[0] = lower ? tril(abar, unit ? -1 : 0) : triu(abar, unit ? 1 : 0);
  }
  return ct;
}

// A = P L U: with M = tril(L^T Lbar, -1) + triu(Ubar U^T),
// Abar = P L^-T M U^-T (square matrices; the JVP has no conjugation, so
// complex matrices take the same transposes).
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
  return {matmul(permutation_matrix(a.out[2], x), y)};
}

// Reduced QR with m >= n. With M = Rbar R^H - Q^H Qbar and
// N = M - tril(M - M^H, -1) - i Im(diag M): Abar = (Q N + Qbar) R^-H (the
// imaginary diagonal is the adjoint of JAX's correction for complex inputs).
Cotangents qr_vjp(const VjpArgs& a) {
  const Aval x = aval_of(a.in[0]);
  const int64_t m = x.shape[x.ndim() - 2], n = x.shape[x.ndim() - 1];
  if (m < n || (a.params.get<bool>("full_matrices") && m != n))
    fail<NotImplementedError>("Unimplemented case of QR decomposition derivative");
  const Value &Q = a.out[0], &R = a.out[1];
  const Value qbar = conj(ops::instantiate(a.ct[0], aval_of(Q)));
  const Value rbar = conj(ops::instantiate(a.ct[1], aval_of(R)));
  const Value M = ops::sub(matmul(rbar, mH(R)), matmul(mH(Q), qbar));
  Value N = ops::sub(M, tril(ops::sub(M, mH(M)), -1));
  if (complex_valued(M)) N = ops::sub(N, imaginary_diagonal(M));
  return {conj(solve_adjoint(R, ops::add(matmul(Q, N), qbar), false, false))};
}

// A = V diag(w) V^H, w real: Abar = V (diag(wbar) + F o (V^H Vbar)) V^H.
Cotangents eigh_vjp(const VjpArgs& a) {
  const Value &V = a.out[0], &w = a.out[1];
  Value inner = ops::zeros(aval_of(V));
  if (a.ct[0]) inner = ops::mul(as_dtype_of(inverse_gaps(w), V), matmul(mH(V), conj(*a.ct[0])));
  if (a.ct[1]) inner = ops::add(inner, as_dtype_of(diag_embed(*a.ct[1]), V));
  return {conj(matmul(V, matmul(inner, mH(V))))};
}

// Reduced SVD A = U S V^H, s real (see docs/architecture.md for the derivation):
// Abar = U C V^H + (I - U U^H) Ubar S^-1 V^H + U S^-1 Vbar^H (I - V V^H),
// C = diag(sbar) + (Gu + Gu^H) S + S (Gv + Gv^H) + i Im(diag(U^H Ubar)) S^-1,
// Gu = F o U^H Ubar, Gv = F o V^H Vbar, F[i, j] = 1 / (s_j^2 - s_i^2); the
// imaginary diagonal (zero for real matrices) is the adjoint of the phase JAX
// gives U's columns.
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
  const Value &s = usv[0], &U = usv[1], V = mH(usv[2]);
  const Value S = as_dtype_of(diag_embed(s), U);
  Value C = a.ct[0] ? as_dtype_of(diag_embed(*a.ct[0]), U) : ops::zeros(aval_of(S));
  const bool ubar = compute_uv && a.ct[1], vbar = compute_uv && a.ct[2];
  if (!ubar && !vbar) return {conj(matmul(U, matmul(C, mH(V))))};
  const Value F = as_dtype_of(inverse_gaps(ops::mul(s, s)), U);
  const Value s_inv = as_dtype_of(ops::div(ops::full_like(s, 1.0), s), U);
  // x S^-1 for a stack x whose last dimension runs over the singular values.
  auto times_s_inv = [&](const Value& x) {
    const Aval xa = aval_of(x);
    return ops::mul(x, along_rows(s_inv, xa.shape[xa.ndim() - 2]));
  };
  Values extra;
  if (ubar) {
    const Value g = conj(*a.ct[1]);
    const Value UHg = matmul(mH(U), g);
    const Value Gu = ops::mul(F, UHg);
    C = ops::add(C, matmul(ops::add(Gu, mH(Gu)), S));
    if (complex_valued(U)) C = ops::add(C, times_s_inv(imaginary_diagonal(UHg)));
    const Value outside = ops::sub(g, matmul(U, UHg));  // (I - U U^H) Ubar
    extra.push_back(matmul(times_s_inv(outside), mH(V)));
  }
  if (vbar) {
    const Value g = mT(*a.ct[2]);  // (conj Vtbar)^H
    const Value VHg = matmul(mH(V), g);
    const Value Gv = ops::mul(F, VHg);
    C = ops::add(C, matmul(S, ops::add(Gv, mH(Gv))));
    const Value outside = ops::sub(g, matmul(V, VHg));  // (I - V V^H) Vbar
    extra.push_back(matmul(U, mH(times_s_inv(outside))));
  }
  Value abar = matmul(U, matmul(C, mH(V)));
  for (const Value& e : extra) abar = ops::add(abar, e);
  return {conj(abar)};
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
    p.operands = exactly(1);
    p.abstract_eval = [](const Avals& in, const Params&) {
      check_matrix("cholesky", in[0], true);
      return Avals{matrix_aval(in[0], in[0].shape, in[0].dtype)};
    };
    p.kernel = [](const Tensors& in, const Params&, const Avals&) {
      return as_tensors(dispatch_wide_inexact(in[0].dtype(), [&](auto t) { return cholesky_kernel<decltype(t)>(in[0]); }));
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
    p.operands = exactly(1);
    p.abstract_eval = [](const Avals& in, const Params&) {
      check_matrix("lu", in[0], false);
      const Aval& x = in[0];
      const int64_t m = x.shape[x.ndim() - 2], n = x.shape[x.ndim() - 1];
      return Avals{matrix_aval(x, x.shape, x.dtype),
                   matrix_aval(x, with_last(x.shape, {std::min(m, n)}), DType::Int32),
                   matrix_aval(x, with_last(x.shape, {m}), DType::Int32)};
    };
    p.kernel = [](const Tensors& in, const Params&, const Avals&) {
      return dispatch_wide_inexact(in[0].dtype(), [&](auto t) { return lu_kernel<decltype(t)>(in[0]); });
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
    p.operands = exactly(1);
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
      return dispatch_wide_inexact(in[0].dtype(), [&](auto t) {
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
    p.operands = exactly(1);
    p.abstract_eval = [](const Avals& in, const Params& params) {
      check_matrix("eigh", in[0], true);
      if (!params.is_none("subset_by_index"))
        fail<NotImplementedError>("eigh with subset_by_index is not implemented");
      const Aval& x = in[0];
      return Avals{matrix_aval(x, x.shape, x.dtype),
                   matrix_aval(x, with_last(x.shape, {x.shape.back()}), real_dtype(x.dtype))};
    };
    p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
      return dispatch_wide_inexact(in[0].dtype(), [&](auto t) {
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
    p.operands = exactly(1);
    p.abstract_eval = [](const Avals& in, const Params& params) {
      check_matrix("svd", in[0], false);
      if (!params.is_none("subset_by_index"))
        fail<NotImplementedError>("svd with subset_by_index is not implemented");
      const Aval& x = in[0];
      const int64_t m = x.shape[x.ndim() - 2], n = x.shape[x.ndim() - 1], k = std::min(m, n);
      const bool full = params.get<bool>("full_matrices");
      Avals out{matrix_aval(x, with_last(x.shape, {k}), real_dtype(x.dtype))};
      if (params.get<bool>("compute_uv")) {
        out.push_back(matrix_aval(x, with_last(x.shape, {m, full ? m : k}), x.dtype));
        out.push_back(matrix_aval(x, with_last(x.shape, {full ? n : k, n}), x.dtype));
      }
      return out;
    };
    p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
      return dispatch_wide_inexact(in[0].dtype(), [&](auto t) {
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
    p.operands = exactly(2);
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
      if (a.dtype != b.dtype || !is_inexact(a.dtype))
        fail<TypeError>("triangular_solve requires floating-point or complex operands of one dtype, got ",
                        dtype_name(a.dtype), " and ", dtype_name(b.dtype));
      return Avals{like(b, b.shape, b.dtype)};
    };
    p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
      return as_tensors(dispatch_wide_inexact(in[0].dtype(), [&](auto t) {
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
  register_schur_primitives();
}

}  // namespace meshsim
