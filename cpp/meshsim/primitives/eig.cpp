// lax.linalg.eig: eigenvalues and left/right eigenvectors of general square
// matrices by LAPACK's ?geev, as JAX computes them on CPU. Real operands give
// complex results (complex64 for float32); each eigenvector has unit
// Euclidean norm with its largest component real (LAPACK's normalisation).
// The VJP is the transpose of JAX's JVP: eigenvalues always; eigenvectors
// only when enable_eigvec_derivs opts in to differentiating through that
// normalisation, as JAX asks.
#include <algorithm>
#include <complex>
#include <limits>
#include <vector>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/ir/ops.h"
#include "meshsim/primitives/lapack.h"
#include "meshsim/primitives/matrix_ops.h"
#include "meshsim/transforms/batching.h"

extern "C" {
void sgeev_(const char* jobvl, const char* jobvr, const int* n, float* a, const int* lda, float* wr, float* wi,
            float* vl, const int* ldvl, float* vr, const int* ldvr, float* work, const int* lwork, int* info);
void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda, double* wr,
            double* wi, double* vl, const int* ldvl, double* vr, const int* ldvr, double* work,
            const int* lwork, int* info);
void cgeev_(const char* jobvl, const char* jobvr, const int* n, std::complex<float>* a, const int* lda,
            std::complex<float>* w, std::complex<float>* vl, const int* ldvl, std::complex<float>* vr,
            const int* ldvr, std::complex<float>* work, const int* lwork, float* rwork, int* info);
void zgeev_(const char* jobvl, const char* jobvr, const int* n, std::complex<double>* a, const int* lda,
            std::complex<double>* w, std::complex<double>* vl, const int* ldvl, std::complex<double>* vr,
            const int* ldvr, std::complex<double>* work, const int* lwork, double* rwork, int* info);
}

namespace meshsim {
namespace {

void geev(const char* jl, const char* jr, const int* n, float* a, float* wr, float* wi, float* vl, float* vr,
          float* work, const int* lwork, int* info) {
  sgeev_(jl, jr, n, a, n, wr, wi, vl, n, vr, n, work, lwork, info);
}
void geev(const char* jl, const char* jr, const int* n, double* a, double* wr, double* wi, double* vl,
          double* vr, double* work, const int* lwork, int* info) {
  dgeev_(jl, jr, n, a, n, wr, wi, vl, n, vr, n, work, lwork, info);
}
void geev(const char* jl, const char* jr, const int* n, complex64* a, complex64* w, complex64* vl, complex64* vr,
          complex64* work, const int* lwork, float* rwork, int* info) {
  cgeev_(jl, jr, n, a, n, w, vl, n, vr, n, work, lwork, rwork, info);
}
void geev(const char* jl, const char* jr, const int* n, complex128* a, complex128* w, complex128* vl,
          complex128* vr, complex128* work, const int* lwork, double* rwork, int* info) {
  zgeev_(jl, jr, n, a, n, w, vl, n, vr, n, work, lwork, rwork, info);
}

// What one matrix's ?geev call fills: eigenvalues and column-major eigenvectors, all complex.
template <class R>
struct EigOut {
  std::vector<std::complex<R>> w, vl, vr;
  bool ok;
};

// A real matrix: ?geev returns conjugate pairs as (re, im) columns j, j+1.
template <class R>
EigOut<R> eig_one(std::vector<R>& a, int n, bool left, bool right) {
  using C = std::complex<R>;
  std::vector<R> wr(n), wi(n), vl(left ? n * n : 1), vr(right ? n * n : 1);
  int info = 0, lwork = -1;
  R query{};
  geev(left ? "V" : "N", right ? "V" : "N", &n, a.data(), wr.data(), wi.data(), vl.data(), vr.data(), &query,
       &lwork, &info);
  lwork = workspace(query);
  std::vector<R> work(lwork);
  geev(left ? "V" : "N", right ? "V" : "N", &n, a.data(), wr.data(), wi.data(), vl.data(), vr.data(),
       work.data(), &lwork, &info);
  EigOut<R> out{std::vector<C>(n), {}, {}, info == 0};
  for (int j = 0; j < n; ++j) out.w[j] = C(wr[j], wi[j]);
  auto unpack = [&](const std::vector<R>& v) {
    std::vector<C> c(static_cast<size_t>(n) * n);
    for (int j = 0; j < n; ++j) {
      const bool pair = wi[j] != 0 && j + 1 < n;
      for (int i = 0; i < n; ++i) {
        if (!pair) {
          c[i + j * n] = C(v[i + j * n], 0);
        } else {
          c[i + j * n] = C(v[i + j * n], v[i + (j + 1) * n]);
          c[i + (j + 1) * n] = C(v[i + j * n], -v[i + (j + 1) * n]);
        }
      }
      if (pair) ++j;
    }
    return c;
  };
  if (left) out.vl = unpack(vl);
  if (right) out.vr = unpack(vr);
  return out;
}

template <class R>
EigOut<R> eig_one(std::vector<std::complex<R>>& a, int n, bool left, bool right) {
  using C = std::complex<R>;
  EigOut<R> out{std::vector<C>(n), std::vector<C>(left ? n * n : 1), std::vector<C>(right ? n * n : 1), false};
  std::vector<R> rwork(2 * static_cast<size_t>(n));
  int info = 0, lwork = -1;
  C query{};
  geev(left ? "V" : "N", right ? "V" : "N", &n, a.data(), out.w.data(), out.vl.data(), out.vr.data(), &query,
       &lwork, rwork.data(), &info);
  lwork = workspace(query.real());
  std::vector<C> work(lwork);
  geev(left ? "V" : "N", right ? "V" : "N", &n, a.data(), out.w.data(), out.vl.data(), out.vr.data(),
       work.data(), &lwork, rwork.data(), &info);
  out.ok = info == 0;
  return out;
}

template <class T>
Tensors eig_kernel(const Tensor& x, const Avals& out, bool left, bool right) {
  using R = decltype(std::real(T{}));
  using C = std::complex<R>;
  const Tensor in = x.contiguous();
  const Stack s = stack_of(in.shape());
  const int n = lapack_int(s.rows, "eig");
  Tensors results;
  for (const Aval& a : out) results.push_back(Tensor::empty(a.dtype, a.shape));
  std::vector<T> a(static_cast<size_t>(n) * n);
  const C nan(std::numeric_limits<R>::quiet_NaN(), std::numeric_limits<R>::quiet_NaN());
  for (int64_t b = 0; b < s.count; ++b) {
    to_colmajor(in.data<T>() + b * n * n, n, n, a.data(), n);
    EigOut<R> e = n > 0 ? eig_one(a, n, left, right) : EigOut<R>{{}, {}, {}, true};
    C* w = results[0].data<C>() + b * n;
    for (int j = 0; j < n; ++j) w[j] = e.ok ? e.w[j] : nan;
    size_t k = 1;
    for (const auto* v : {left ? &e.vl : nullptr, right ? &e.vr : nullptr}) {
      if (!v) continue;
      C* dst = results[k++].data<C>() + b * n * n;
      from_colmajor(v->data(), n, n, n, dst);
      if (!e.ok) std::fill(dst, dst + n * n, nan);
    }
  }
  return results;
}


// ---- VJP -----------------------------------------------------------------------------------

using namespace matrix_ops;  // NOLINT: the rule is written in these ops

// V^-T x for square V, by V's LU factors: V = P L U, so V^-T = P L^-T U^-T.
Value solve_transposed(const Value& v, const Value& x) {
  const Values lu = meshsim::bind(primitive("lu"), {v}, {});
  const Value y = solve_triangular(lu[0], solve_triangular(lu[0], x, true, false, true), true, true, true, true);
  return matmul(permutation_matrix(lu[2], aval_of(v)), y);
}

// Sum over the rows of a stack: (..., m, n) -> (..., n).
Value column_sums(const Value& x) { return ops::reduce_sum(x, {rank_of(x) - 2}); }
// (..., n) along the rows of a (..., m, n) stack shaped like `like`.
Value down_columns(const Value& v, const Value& like) { return along_rows(v, aval_of(like).shape[rank_of(like) - 2]); }
Value real_of(const Value& x) { return ops::bind1("real", {x}); }
Value imag_of(const Value& x) { return ops::bind1("imag", {x}); }
Value complex_of(const Value& re, const Value& im) { return ops::bind1("complex", {re, im}); }

// JAX's JVP: with P = V^-1 dA V, dw = diag(P) and (eigenvectors) dV = U + V diag(c),
// U = V (F o P), F[i, j] = 1 / (w_j - w_i) off the diagonal, and c fixing LAPACK's
// normalisation (unit norm, largest component k_j real):
// c_j = -Re(v_j^H u_j) - i Im(u_{k_j j}) / Re(v_{k_j j}). The VJP is that map's
// adjoint between two conj calls (see decompositions.cpp), for eigenvalues w, right
// eigenvectors V and the cotangents of w and V (either may be absent).
Value eigvec_vjp(const Value& w, const Value& V, const Cotangent& wbar, const Cotangent& vbar) {
  Value pbar = ops::zeros(aval_of(V));  // the adjoint's P cotangent
  if (wbar) pbar = diag_embed(conj(*wbar));
  if (vbar) {
    const Value g = conj(*vbar);
    const Value cbar = column_sums(ops::mul(conj(V), g));  // c's cotangent: diag(V^H g)
    // k_j = argmax_i |v_ij|, as a mask.
    const int64_t r = rank_of(V);
    const Value k = ops::bind1("argmax", {ops::abs(V)}, {{"axes", IntList{r - 2}}, {"index_dtype", DType::Int32}});
    const Aval va = aval_of(V);
    const Value mask = ops::eq(ops::iota(DType::Int32, va.shape, r - 2), down_columns(k, V));
    const Value M = ops::convert(mask, va.dtype);
    const Value d = real_of(column_sums(ops::mul(M, V)));
    // c_j = -Re(s1_j) - i Im(s2_j) / d_j with s1 = sum_i conj(v) u, s2 = sum_i M u.
    const Value s1bar = as_dtype_of(ops::neg(real_of(cbar)), V);
    const Value zero = ops::zeros_like(d);
    const Value s2bar = complex_of(zero, ops::neg(ops::div(imag_of(cbar), d)));
    const Value ubar = ops::add(g, ops::add(ops::mul(V, down_columns(s1bar, V)), ops::mul(M, down_columns(s2bar, V))));
    // F[i, j] = 1 / (w_j - w_i) off the diagonal: inverse_gaps(w).
    pbar = ops::add(pbar, ops::mul(conj(inverse_gaps(w)), matmul(mH(V), ubar)));
  }
  // dA's cotangent: V^-H pbar V^H, conjugated: V^-T conj(pbar) V^T.
  return solve_transposed(V, matmul(conj(pbar), mT(V)));
}

// Left eigenvectors are A^H's right ones, for eigenvalues conj(w) (JAX's JVP runs the right
// eigenvectors' rule on conj(w), VL and dA^H): their part of dA's cotangent is the adjoint of
// that rule's, conjugate-transposed.
Cotangents eig_vjp(const VjpArgs& a) {
  const Params& p = a.params;
  const bool left = p.get_or<bool>("compute_left_eigenvectors", true);
  const bool right = p.get_or<bool>("compute_right_eigenvectors", true);
  if ((left || right) && !p.get_or<bool>("enable_eigvec_derivs", false))
    fail<NotImplementedError>(
        "Derivatives of non-symmetric eigenvectors are only valid under assumptions on the input that JAX "
        "cannot check (see the enable_eigvec_derivs argument to jax.lax.linalg.eig). Pass "
        "enable_eigvec_derivs=True to jax.lax.linalg.eig to opt in. See "
        "https://github.com/jax-ml/jax/issues/2748 for discussion.");
  const Value& w = a.out[0];
  const Cotangent vlbar = left ? a.ct[1] : Cotangent{};
  const Cotangent vrbar = right ? a.ct.back() : Cotangent{};
  std::optional<Value> abar;
  if (a.ct[0] || vrbar) {
    Value V = a.out.back();
    if (!right) {
      Params q = p;
      q.set("compute_left_eigenvectors", false);
      q.set("compute_right_eigenvectors", true);
      V = meshsim::bind(primitive("eig"), {a.in[0]}, q).back();
    }
    abar = eigvec_vjp(w, V, a.ct[0], vrbar);
  }
  if (vlbar) {
    const Value from_left = mH(eigvec_vjp(conj(w), a.out[1], Cotangent{}, vlbar));
    abar = abar ? ops::add(*abar, from_left) : from_left;
  }
  if (!abar) return {Cotangent{}};
  if (!complex_valued(a.in[0])) abar = real_of(*abar);
  return {*abar};
}

}  // namespace

void register_eig_primitive() {
  Primitive p;
  p.name = "eig";
  p.operands = exactly(1);
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Aval& x = in[0];
    if (x.ndim() < 2 || x.shape[x.ndim() - 1] != x.shape[x.ndim() - 2])
      fail<ValueError>("Argument to nonsymmetric eigendecomposition must have shape [..., n, n], got shape ",
                       shape_str(x.shape));
    if (!is_inexact(x.dtype) || is_narrow_float(x.dtype))
      fail<TypeError>("eig requires a float32, float64, complex64 or complex128 operand, got ",
                      dtype_name(x.dtype));
    const DType c = complex_dtype(x.dtype);
    Avals out{like(x, with_last(x.shape, {x.shape.back()}), c)};
    if (params.get_or<bool>("compute_left_eigenvectors", true)) out.push_back(like(x, x.shape, c));
    if (params.get_or<bool>("compute_right_eigenvectors", true)) out.push_back(like(x, x.shape, c));
    return out;
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const bool left = params.get_or<bool>("compute_left_eigenvectors", true);
    const bool right = params.get_or<bool>("compute_right_eigenvectors", true);
    return dispatch_wide_inexact(in[0].dtype(), [&](auto t) {
      return eig_kernel<decltype(t)>(in[0], out, left, right);
    });
  };
  p.cost = [](const Avals& in, const Params&, const Avals& out) {
    const double n = static_cast<double>(in[0].shape.back());
    Cost c = memory_cost(in, out);
    c.flops = 25 * n * n * n * static_cast<double>(stack_of(in[0].shape).count);
    return c;
  };
  p.batch = [](const BatchArgs& a) { return bind_at_front(a, a.params); };
  p.vjp = eig_vjp;
  register_primitive(std::move(p));
}

}  // namespace meshsim
