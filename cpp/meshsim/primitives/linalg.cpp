// dot_general: contraction over named dimensions, batched; BLAS gemm for floats.
#include <cblas.h>

#include <algorithm>

#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/families.h"

namespace meshsim {
namespace {

struct DotDims {
  IntList lhs_contract, rhs_contract, lhs_batch, rhs_batch;
  IntList lhs_free, rhs_free;
};

IntList free_dims(int64_t ndim, const IntList& a, const IntList& b) {
  IntList f;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
      f.push_back(d);
  return f;
}

DotDims dot_dims(const Params& params, int64_t lhs_ndim, int64_t rhs_ndim) {
  const IntLists& dn = params.get<IntLists>("dimension_numbers");  // lc, rc, lb, rb
  DotDims d{dn.at(0), dn.at(1), dn.at(2), dn.at(3), {}, {}};
  d.lhs_free = free_dims(lhs_ndim, d.lhs_contract, d.lhs_batch);
  d.rhs_free = free_dims(rhs_ndim, d.rhs_contract, d.rhs_batch);
  return d;
}

Avals dot_general_eval(const Avals& in, const Params& params) {
  const Aval &x = in[0], &y = in[1];
  DotDims d = dot_dims(params, x.ndim(), y.ndim());
  if (d.lhs_contract.size() != d.rhs_contract.size() || d.lhs_batch.size() != d.rhs_batch.size())
    fail<TypeError>("dot_general requires equal numbers of lhs and rhs contracting and batch dimensions");
  for (auto dims : {std::make_pair(&d.lhs_contract, &x), std::make_pair(&d.lhs_batch, &x),
                    std::make_pair(&d.rhs_contract, &y), std::make_pair(&d.rhs_batch, &y)})
    for (int64_t a : *dims.first)
      if (a < 0 || a >= dims.second->ndim())
        fail<TypeError>("dot_general dimension ", a, " is out of range for an operand of shape ",
                        shape_str(dims.second->shape));
  for (size_t i = 0; i < d.lhs_batch.size(); ++i)
    if (x.shape[d.lhs_batch[i]] != y.shape[d.rhs_batch[i]])
      fail<TypeError>("dot_general requires lhs batch dimensions and rhs batch dimensions to have the "
                      "same shape, got ", shape_str(x.shape), " and ", shape_str(y.shape), ".");
  for (size_t i = 0; i < d.lhs_contract.size(); ++i)
    if (x.shape[d.lhs_contract[i]] != y.shape[d.rhs_contract[i]])
      fail<TypeError>("dot_general requires contracting dimensions to have the same shape, got ",
                      x.shape[d.lhs_contract[i]], " and ", y.shape[d.rhs_contract[i]],
                      " (operand shapes ", shape_str(x.shape), " and ", shape_str(y.shape), ").");
  if (x.dtype != y.dtype)
    fail<TypeError>("dot_general requires operands of the same dtype, got ", dtype_name(x.dtype),
                    " and ", dtype_name(y.dtype));
  Shape out;
  for (int64_t a : d.lhs_batch) out.push_back(x.shape[a]);
  for (int64_t a : d.lhs_free) out.push_back(x.shape[a]);
  for (int64_t a : d.rhs_free) out.push_back(y.shape[a]);
  DType dt = params.is_none("preferred_element_type") ? x.dtype
                                                       : params.get<DType>("preferred_element_type");
  return {like(x, out, dt, x.weak_type && y.weak_type)};
}

// Views an operand as [batch, rows, cols] with rows = `outer`, cols = `inner` dims.
Tensor as_3d(const Tensor& t, const IntList& batch, const IntList& outer, const IntList& inner) {
  IntList perm = batch;
  perm.insert(perm.end(), outer.begin(), outer.end());
  perm.insert(perm.end(), inner.begin(), inner.end());
  auto prod = [&](const IntList& dims) {
    int64_t n = 1;
    for (int64_t a : dims) n *= t.shape()[a];
    return n;
  };
  return t.transpose(perm).reshape({prod(batch), prod(outer), prod(inner)});
}

template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c) {
  auto A = ta ? CblasTrans : CblasNoTrans;
  auto B = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, A, B, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
  else if constexpr (std::is_same_v<T, double>)
    cblas_dgemm(CblasRowMajor, A, B, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, n);
  else {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = T(0);
        for (int64_t p = 0; p < k; ++p)
          acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
        c[i * n + j] = acc;
      }
  }
}

Tensors dot_general_kernel(const Tensors& in, const Params& params, const Avals& out) {
  DotDims d = dot_dims(params, in[0].ndim(), in[1].ndim());
  // lhs as [B, M, K] and rhs as [B, K, N]; BLAS transposes spare a copy when
  // an operand is naturally laid out the other way round.
  Tensor a = as_3d(in[0], d.lhs_batch, d.lhs_free, d.lhs_contract);
  Tensor b = as_3d(in[1], d.rhs_batch, d.rhs_contract, d.rhs_free);
  Tensor result = Tensor::empty(in[0].dtype(), out[0].shape);
  const int64_t B = a.shape()[0], M = a.shape()[1], K = a.shape()[2], N = b.shape()[2];
  dispatch_numeric(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* c = result.data<T>();
    if (K == 0) { std::fill(c, c + B * M * N, T(0)); return; }
    for (int64_t i = 0; i < B; ++i)
      gemm<T>(false, false, M, N, K, a.data<T>() + i * M * K, K, b.data<T>() + i * K * N, N,
              c + i * M * N);
  });
  if (result.dtype() != out[0].dtype) fail<NotImplementedError>("dot_general preferred_element_type");
  return {result};
}

}  // namespace

void register_linalg_primitives() {
  Primitive p;
  p.name = "dot_general";
  p.abstract_eval = dot_general_eval;
  p.kernel = dot_general_kernel;
  register_primitive(std::move(p));
}

}  // namespace meshsim
