// lax.linalg.schur, hessenberg and householder_product by LAPACK's ?gees,
// ?gehrd and ?orgqr/?ungqr, as JAX computes them on CPU, for float32/64 and
// complex64/128. schur: the (quasi-)triangular Schur form T and the Schur
// vectors Z with A = Z T Z^H (no eigenvalue sorting). hessenberg: ?gehrd's
// packed output (H on and above the subdiagonal, the Householder vectors
// below it) and the n - 1 scalar factors. householder_product: the first n
// columns of the product of those reflectors. A failed factorisation gives
// NaNs, as JAX replaces it. None is differentiable (JAX defines no rule).
#include <complex>
#include <limits>
#include <vector>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/lapack.h"
#include "meshsim/primitives/lapack_routines.h"
#include "meshsim/transforms/batching.h"

extern "C" {
using c64 = std::complex<float>;
using c128 = std::complex<double>;
using Select2 = int (*)(const void*, const void*);
void sgees_(const char* jobvs, const char* sort, Select2 select, const int* n, float* a, const int* lda, int* sdim,
            float* wr, float* wi, float* vs, const int* ldvs, float* work, const int* lwork, int* bwork, int* info);
void dgees_(const char* jobvs, const char* sort, Select2 select, const int* n, double* a, const int* lda,
            int* sdim, double* wr, double* wi, double* vs, const int* ldvs, double* work, const int* lwork,
            int* bwork, int* info);
void cgees_(const char* jobvs, const char* sort, Select2 select, const int* n, c64* a, const int* lda, int* sdim,
            c64* w, c64* vs, const int* ldvs, c64* work, const int* lwork, float* rwork, int* bwork, int* info);
void zgees_(const char* jobvs, const char* sort, Select2 select, const int* n, c128* a, const int* lda,
            int* sdim, c128* w, c128* vs, const int* ldvs, c128* work, const int* lwork, double* rwork,
            int* bwork, int* info);
void sgehrd_(const int* n, const int* ilo, const int* ihi, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgehrd_(const int* n, const int* ilo, const int* ihi, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void cgehrd_(const int* n, const int* ilo, const int* ihi, c64* a, const int* lda, c64* tau, c64* work,
             const int* lwork, int* info);
void zgehrd_(const int* n, const int* ilo, const int* ihi, c128* a, const int* lda, c128* tau, c128* work,
             const int* lwork, int* info);
}

namespace meshsim {
namespace {

// ---- LAPACK by element type: one overload set per routine -------------------------------

// ?gees with sort = 'N'; eigenvalues are computed and dropped.
int gees(bool vectors, int n, float* a, float* vs) {
  int sdim = 0, info = 0, lwork = -1;
  std::vector<float> wr(n), wi(n);
  float query = 0;
  const char* job = vectors ? "V" : "N";
  sgees_(job, "N", nullptr, &n, a, &n, &sdim, wr.data(), wi.data(), vs, &n, &query, &lwork, nullptr, &info);
  lwork = workspace(query);
  std::vector<float> work(lwork);
  sgees_(job, "N", nullptr, &n, a, &n, &sdim, wr.data(), wi.data(), vs, &n, work.data(), &lwork, nullptr, &info);
  return info;
}
int gees(bool vectors, int n, double* a, double* vs) {
  int sdim = 0, info = 0, lwork = -1;
  std::vector<double> wr(n), wi(n);
  double query = 0;
  const char* job = vectors ? "V" : "N";
  dgees_(job, "N", nullptr, &n, a, &n, &sdim, wr.data(), wi.data(), vs, &n, &query, &lwork, nullptr, &info);
  lwork = workspace(query);
  std::vector<double> work(lwork);
  dgees_(job, "N", nullptr, &n, a, &n, &sdim, wr.data(), wi.data(), vs, &n, work.data(), &lwork, nullptr, &info);
  return info;
}
int gees(bool vectors, int n, c64* a, c64* vs) {
  int sdim = 0, info = 0, lwork = -1;
  std::vector<c64> w(n);
  std::vector<float> rwork(n);
  c64 query = 0;
  const char* job = vectors ? "V" : "N";
  cgees_(job, "N", nullptr, &n, a, &n, &sdim, w.data(), vs, &n, &query, &lwork, rwork.data(), nullptr, &info);
  lwork = workspace(query.real());
  std::vector<c64> work(lwork);
  cgees_(job, "N", nullptr, &n, a, &n, &sdim, w.data(), vs, &n, work.data(), &lwork, rwork.data(), nullptr, &info);
  return info;
}
int gees(bool vectors, int n, c128* a, c128* vs) {
  int sdim = 0, info = 0, lwork = -1;
  std::vector<c128> w(n);
  std::vector<double> rwork(n);
  c128 query = 0;
  const char* job = vectors ? "V" : "N";
  zgees_(job, "N", nullptr, &n, a, &n, &sdim, w.data(), vs, &n, &query, &lwork, rwork.data(), nullptr, &info);
  lwork = workspace(query.real());
  std::vector<c128> work(lwork);
  zgees_(job, "N", nullptr, &n, a, &n, &sdim, w.data(), vs, &n, work.data(), &lwork, rwork.data(), nullptr,
         &info);
  return info;
}

void gehrd(const int* n, const int* lo, const int* hi, float* a, float* t, float* w, const int* lw, int* i) {
  sgehrd_(n, lo, hi, a, n, t, w, lw, i);
}
void gehrd(const int* n, const int* lo, const int* hi, double* a, double* t, double* w, const int* lw, int* i) {
  dgehrd_(n, lo, hi, a, n, t, w, lw, i);
}
void gehrd(const int* n, const int* lo, const int* hi, c64* a, c64* t, c64* w, const int* lw, int* i) {
  cgehrd_(n, lo, hi, a, n, t, w, lw, i);
}
void gehrd(const int* n, const int* lo, const int* hi, c128* a, c128* t, c128* w, const int* lw, int* i) {
  zgehrd_(n, lo, hi, a, n, t, w, lw, i);
}

template <class T>
double real_part(T v) {
  return static_cast<double>(std::real(v));
}

template <class T>
void fill_nan(T* p, int64_t count) {
  using R = decltype(std::real(T{}));
  const R nan = std::numeric_limits<R>::quiet_NaN();
  for (int64_t i = 0; i < count; ++i) p[i] = T(nan);
}

// ---- kernels ------------------------------------------------------------------------------

template <class T>
Tensors schur_kernel(const Tensor& x, const Avals& out, bool vectors) {
  const Tensor in = x.contiguous();
  const Stack s = stack_of(in.shape());
  const int n = lapack_int(s.rows, "schur");
  Tensors results;
  for (const Aval& a : out) results.push_back(Tensor::empty(a.dtype, a.shape));
  std::vector<T> a(static_cast<size_t>(n) * n), vs(vectors ? static_cast<size_t>(n) * n : 1);
  for (int64_t b = 0; b < s.count; ++b) {
    to_colmajor(in.data<T>() + b * n * n, n, n, a.data(), n);
    const int info = n > 0 ? gees(vectors, n, a.data(), vs.data()) : 0;
    T* t = results[0].data<T>() + b * n * n;
    from_colmajor(a.data(), n, n, n, t);
    if (info != 0) fill_nan(t, static_cast<int64_t>(n) * n);
    if (vectors) {
      T* z = results[1].data<T>() + b * n * n;
      from_colmajor(vs.data(), n, n, n, z);
      if (info != 0) fill_nan(z, static_cast<int64_t>(n) * n);
    }
  }
  return results;
}

template <class T>
Tensors hessenberg_kernel(const Tensor& x, const Avals& out) {
  const Tensor in = x.contiguous();
  const Stack s = stack_of(in.shape());
  const int n = lapack_int(s.rows, "hessenberg");
  Tensors results{Tensor::empty(out[0].dtype, out[0].shape), Tensor::empty(out[1].dtype, out[1].shape)};
  std::vector<T> a(static_cast<size_t>(n) * n), tau(std::max(n, 1));
  const int lo = 1, hi = n;
  for (int64_t b = 0; b < s.count; ++b) {
    to_colmajor(in.data<T>() + b * n * n, n, n, a.data(), n);
    int info = 0;
    if (n > 0) {
      int lwork = -1;
      T query{};
      gehrd(&n, &lo, &hi, a.data(), tau.data(), &query, &lwork, &info);
      lwork = workspace(real_part(query));
      std::vector<T> work(lwork);
      gehrd(&n, &lo, &hi, a.data(), tau.data(), work.data(), &lwork, &info);
    }
    T* h = results[0].data<T>() + b * n * n;
    from_colmajor(a.data(), n, n, n, h);
    T* taus = results[1].data<T>() + b * std::max(n - 1, 0);
    std::copy(tau.begin(), tau.begin() + std::max(n - 1, 0), taus);
    if (info != 0) {
      fill_nan(h, static_cast<int64_t>(n) * n);
      fill_nan(taus, std::max(n - 1, 0));
    }
  }
  return results;
}

template <class T>
Tensor householder_product_kernel(const Tensor& x, const Tensor& t, const Aval& out) {
  const Tensor in = x.contiguous(), taus = t.contiguous();
  const Stack s = stack_of(in.shape());
  const int m = lapack_int(s.rows, "householder_product"), n = lapack_int(s.cols, "householder_product");
  const int k = lapack_int(taus.shape().back(), "householder_product");
  Tensor result = Tensor::empty(out.dtype, out.shape);
  std::vector<T> a(static_cast<size_t>(m) * std::max(n, 1));
  for (int64_t b = 0; b < s.count; ++b) {
    to_colmajor(in.data<T>() + b * m * n, m, n, a.data(), m);
    int info = 0;
    if (m > 0 && n > 0) {
      int lwork = -1;
      T query{};
      const T* tau = taus.data<T>() + b * k;
      lapack::ungqr(&m, &n, &k, a.data(), &m, tau, &query, &lwork, &info);
      lwork = workspace(real_part(query));
      std::vector<T> work(lwork);
      lapack::ungqr(&m, &n, &k, a.data(), &m, tau, work.data(), &lwork, &info);
    }
    from_colmajor(a.data(), m, m, n, result.data<T>() + b * m * n);
  }
  return result;
}

void require_inexact(const Aval& x, const char* prim) {
  if (!is_inexact(x.dtype) || is_narrow_float(x.dtype))
    fail<TypeError>(prim, " requires a float32, float64, complex64 or complex128 operand, got ",
                    dtype_name(x.dtype));
}

Cost cubic_cost(const Avals& in, const Avals& out, double per_n3) {
  const Stack s = stack_of(in[0].shape);
  Cost c = memory_cost(in, out);
  c.flops = per_n3 * static_cast<double>(s.rows) * s.rows * s.cols * static_cast<double>(s.count);
  return c;
}

}  // namespace

void register_schur_primitives() {
  {
    Primitive p;
    p.name = "schur";
    p.operands = exactly(1);
    p.abstract_eval = [](const Avals& in, const Params& params) {
      const Aval& x = in[0];
      if (x.ndim() < 2 || x.shape[x.ndim() - 1] != x.shape[x.ndim() - 2])
        fail<ValueError>("The input to schur must be a square matrix. Got shape ",
                         shape_str(x.ndim() < 2 ? x.shape : Shape(x.shape.end() - 2, x.shape.end())), ".");
      require_inexact(x, "schur");
      if (params.get_or<bool>("sort_eig_vals", false))
        fail<NotImplementedError>("The sort feature of LAPACK's gees routine is not implemented.");
      Avals out{like(x, x.shape, x.dtype)};
      if (params.get_or<bool>("compute_schur_vectors", true)) out.push_back(like(x, x.shape, x.dtype));
      return out;
    };
    p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
      const bool vectors = params.get_or<bool>("compute_schur_vectors", true);
      return dispatch_wide_inexact(in[0].dtype(), [&](auto t) {
        return schur_kernel<decltype(t)>(in[0], out, vectors);
      });
    };
    p.cost = [](const Avals& in, const Params&, const Avals& out) { return cubic_cost(in, out, 25); };
    p.batch = [](const BatchArgs& a) { return bind_at_front(a, a.params); };
    register_primitive(std::move(p));
  }
  {
    Primitive p;
    p.name = "hessenberg";
    p.operands = exactly(1);
    p.abstract_eval = [](const Avals& in, const Params&) {
      const Aval& x = in[0];
      if (x.ndim() < 2 || x.shape[x.ndim() - 1] != x.shape[x.ndim() - 2])
        fail<ValueError>("Argument to Hessenberg reduction must have shape [..., n, n], got shape ",
                         shape_str(x.shape));
      require_inexact(x, "hessenberg");
      return Avals{like(x, x.shape, x.dtype), like(x, with_last(x.shape, {x.shape.back() - 1}), x.dtype)};
    };
    p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
      return dispatch_wide_inexact(in[0].dtype(), [&](auto t) { return hessenberg_kernel<decltype(t)>(in[0], out); });
    };
    p.cost = [](const Avals& in, const Params&, const Avals& out) { return cubic_cost(in, out, 10.0 / 3); };
    p.batch = [](const BatchArgs& a) { return bind_at_front(a, a.params); };
    register_primitive(std::move(p));
  }
  {
    Primitive p;
    p.name = "householder_product";
    p.operands = exactly(2);
    p.abstract_eval = [](const Avals& in, const Params&) {
      const Aval &a = in[0], &taus = in[1];
      if (a.ndim() < 2 || taus.ndim() != a.ndim() - 1)
        fail<ValueError>("householder_product expects a of shape [..., m, n] and taus of shape [..., k], got ",
                         shape_str(a.shape), " and ", shape_str(taus.shape));
      const int64_t m = a.shape[a.ndim() - 2], n = a.shape.back();
      if (m < n)
        fail<ValueError>("The first argument to householder_product must have at least as many rows as "
                         "columns, got shape ",
                         shape_str({m, n}));
      if (taus.shape.back() > std::min(m, n))
        fail<ValueError>("The second argument to householder_product must not have more rows than the minimum "
                         "of the first argument's rows and columns.");
      require_inexact(a, "householder_product");
      if (taus.dtype != a.dtype)
        fail<TypeError>("householder_product requires a and taus of one dtype, got ", dtype_name(a.dtype),
                        " and ", dtype_name(taus.dtype));
      return Avals{like(a, a.shape, a.dtype)};
    };
    p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
      return Tensors{dispatch_wide_inexact(in[0].dtype(), [&](auto t) {
        return householder_product_kernel<decltype(t)>(in[0], in[1], out[0]);
      })};
    };
    p.cost = [](const Avals& in, const Params&, const Avals& out) { return cubic_cost(in, out, 4.0 / 3); };
    p.batch = [](const BatchArgs& a) { return bind_at_front(a, a.params); };
    register_primitive(std::move(p));
  }
}

}  // namespace meshsim
