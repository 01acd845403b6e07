// dot_general: contraction over named dimensions, batched. Floats go to BLAS
// (gemm, gemv for matrix-vector) reading operands in place whenever their
// strides let a BLAS transpose flag stand in for a copy; integers and bools
// use a vectorised loop.
#include <cblas.h>

#include <algorithm>
#include <optional>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/cast.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/families.h"

namespace meshsim {
namespace {

// ---- dimension numbers and type rules ------------------------------------

// Params: dimension_numbers = (lhs_contract, rhs_contract, lhs_batch, rhs_batch),
// JAX's ((lc, rc), (lb, rb)) flattened.
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
  const IntLists& dn = params.get<IntLists>("dimension_numbers");
  if (dn.size() != 4)
    fail<TypeError>("dot_general dimension_numbers must be (lhs_contract, rhs_contract, lhs_batch, "
                    "rhs_batch), got ", param_value_str(dn));
  DotDims d{dn[0], dn[1], dn[2], dn[3], {}, {}};
  d.lhs_free = free_dims(lhs_ndim, d.lhs_contract, d.lhs_batch);
  d.rhs_free = free_dims(rhs_ndim, d.rhs_contract, d.rhs_batch);
  return d;
}

bool distinct(const IntList& a) {
  IntList s = a;
  std::sort(s.begin(), s.end());
  return std::adjacent_find(s.begin(), s.end()) == s.end();
}

bool disjoint(const IntList& a, const IntList& b) {
  for (int64_t x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return false;
  return true;
}

Shape sizes(const Shape& shape, const IntList& dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(shape[d]);
  return s;
}

// JAX's _dot_general_shape_rule checks, with its messages.
void check_operand_dims(const char* side, const Aval& x, const IntList& contract, const IntList& batch) {
  for (const IntList* dims : {&contract, &batch})
    for (int64_t a : *dims)
      if (a < 0 || a >= x.ndim())
        fail<TypeError>("dot_general requires ", side, " dimension numbers to be nonnegative and less "
                        "than the number of axes of the ", side, " value, got ", side, "_batch of ",
                        param_value_str(batch), " and ", side, "_contracting of ", param_value_str(contract),
                        " for ", side, " of rank ", x.ndim());
  if (!distinct(batch))
    fail<TypeError>("dot_general requires ", side, " batch dimensions to be distinct, got ", side,
                    "_batch ", param_value_str(batch), ".");
  if (!distinct(contract))
    fail<TypeError>("dot_general requires ", side, " contracting dimensions to be distinct, got ", side,
                    "_contracting ", param_value_str(contract), ".");
  if (!disjoint(contract, batch))
    fail<TypeError>("dot_general requires ", side, " batch dimensions to be disjoint from contracting "
                    "dimensions, got ", side, "_batch ", param_value_str(batch), " and ", side,
                    "_contracting ", param_value_str(contract), ".");
}

// XLA's HigherPrecisionType: the operand type that wins when they differ
// (floats over integers, wider over narrower, signed over unsigned).
int precision_rank(DType dt) {
  const int bits = static_cast<int>(itemsize(dt) * 8);
  if (is_floating(dt)) return 1000 + bits;
  if (is_bool(dt)) return 0;
  return 2 * bits + (is_signed_int(dt) ? 1 : 0);
}

DType higher_precision(DType a, DType b) { return precision_rank(a) >= precision_rank(b) ? a : b; }

DType dot_result_dtype(const Aval& x, const Aval& y, const Params& params) {
  const DType dt = higher_precision(x.dtype, y.dtype);
  if (params.is_none("preferred_element_type")) return dt;
  const DType preferred = params.get<DType>("preferred_element_type");
  const int bits = is_bool(dt) ? 1 : static_cast<int>(itemsize(dt) * 8);
  if (!is_floating(dt) && preferred != dt && static_cast<int>(itemsize(preferred) * 8) < bits)
    fail<TypeError>("`preferred_element_type` must not be narrower than the original type, got "
                    "preferred_element_type of ", dtype_name(preferred), " for result type of ",
                    dtype_name(dt), ".");
  return preferred;
}

Avals dot_general_eval(const Avals& in, const Params& params) {
  const Aval &x = in[0], &y = in[1];
  DotDims d = dot_dims(params, x.ndim(), y.ndim());
  check_operand_dims("lhs", x, d.lhs_contract, d.lhs_batch);
  check_operand_dims("rhs", y, d.rhs_contract, d.rhs_batch);
  if (d.lhs_batch.size() != d.rhs_batch.size())
    fail<TypeError>("dot_general requires equal numbers of lhs_batch and rhs_batch dimensions, got "
                    "lhs_batch ", param_value_str(d.lhs_batch), " and rhs_batch ",
                    param_value_str(d.rhs_batch), ".");
  if (sizes(x.shape, d.lhs_batch) != sizes(y.shape, d.rhs_batch))
    fail<TypeError>("dot_general requires lhs batch dimensions and rhs batch dimensions to have the "
                    "same shape, got ", shape_str(sizes(x.shape, d.lhs_batch)), " and ",
                    shape_str(sizes(y.shape, d.rhs_batch)), ".");
  if (sizes(x.shape, d.lhs_contract) != sizes(y.shape, d.rhs_contract))
    fail<TypeError>("dot_general requires contracting dimensions to have the same shape, got ",
                    shape_str(sizes(x.shape, d.lhs_contract)), " and ",
                    shape_str(sizes(y.shape, d.rhs_contract)), ".");
  Shape out = sizes(x.shape, d.lhs_batch);
  for (int64_t a : d.lhs_free) out.push_back(x.shape[a]);
  for (int64_t a : d.rhs_free) out.push_back(y.shape[a]);
  return {like(x, out, dot_result_dtype(x, y, params), x.weak_type && y.weak_type)};
}

// ---- operand layouts ---------------------------------------------------------

// An operand seen as a batch of matrices: element (b, r, c) at
// data + b * batch_stride + r * row_stride + c * col_stride.
struct Matrices {
  int64_t batch, rows, cols;
  int64_t batch_stride, row_stride, col_stride;
};

// Size and stride of `dims` of t taken as one dimension, if its strides allow
// that without a copy.
std::optional<std::pair<int64_t, int64_t>> merged(const Tensor& t, const IntList& dims) {
  int64_t size = 1, stride = 0;
  bool first = true;
  for (int64_t d : dims) {
    const int64_t n = t.shape()[d], s = t.strides()[d];
    if (n == 1) continue;
    if (!first && stride != s * n) return std::nullopt;
    size *= n;
    stride = s;
    first = false;
  }
  return std::make_pair(size, stride);
}

std::optional<Matrices> as_matrices(const Tensor& t, const IntList& batch, const IntList& rows,
                                    const IntList& cols) {
  auto b = merged(t, batch), r = merged(t, rows), c = merged(t, cols);
  if (!b || !r || !c) return std::nullopt;
  return Matrices{b->first, r->first, c->first, b->second, r->second, c->second};
}

// A packed [batch, rows, cols] copy, for layouts neither BLAS nor the loops take.
Tensor packed(const Tensor& t, const IntList& batch, const IntList& rows, const IntList& cols) {
  IntList perm = batch;
  perm.insert(perm.end(), rows.begin(), rows.end());
  perm.insert(perm.end(), cols.begin(), cols.end());
  auto prod = [&](const IntList& dims) {
    int64_t n = 1;
    for (int64_t a : dims) n *= t.shape()[a];
    return n;
  };
  return t.transpose(perm).reshape({prod(batch), prod(rows), prod(cols)});
}

Matrices packed_matrices(const Tensor& p) {
  const int64_t r = p.shape()[1], c = p.shape()[2];
  return {p.shape()[0], r, c, r * c, c, 1};
}

// How BLAS reads one matrix: row-major with leading dimension `ld`, possibly
// transposed.
struct BlasOperand {
  bool trans;
  int64_t ld;
};

// Strides of size-1 dimensions are free; a row- or column-major matrix then
// maps to BLAS without a copy.
std::optional<BlasOperand> blas_operand(const Matrices& m) {
  int64_t rs = m.row_stride, cs = m.col_stride;
  if (m.cols <= 1) cs = 1;
  if (m.rows <= 1) rs = cs == 1 ? std::max<int64_t>(m.cols, 1) : 1;
  if (cs == 1 && rs >= std::max<int64_t>(m.cols, 1)) return BlasOperand{false, rs};
  if (rs == 1 && cs >= std::max<int64_t>(m.rows, 1)) return BlasOperand{true, cs};
  return std::nullopt;
}

// ---- kernels -----------------------------------------------------------------

template <class T>
void blas_gemm(const BlasOperand& a, const BlasOperand& b, int64_t m, int64_t n, int64_t k,
               const T* pa, const T* pb, T* c) {
  auto op = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, op(a.trans), op(b.trans), m, n, k, 1.0f, pa, a.ld, pb, b.ld, 0.0f, c, n);
  else
    cblas_dgemm(CblasRowMajor, op(a.trans), op(b.trans), m, n, k, 1.0, pa, a.ld, pb, b.ld, 0.0, c, n);
}

// y = op(A) x, A stored rows x cols as described by `a`.
template <class T>
void blas_gemv(const BlasOperand& a, int64_t rows, int64_t cols, const T* pa, const T* x,
               int64_t incx, T* y) {
  const auto op = a.trans ? CblasTrans : CblasNoTrans;
  // A transposed operand is stored as a cols x rows row-major matrix.
  const int64_t m = a.trans ? cols : rows, n = a.trans ? rows : cols;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, op, m, n, 1.0f, pa, a.ld, x, incx, 0.0f, y, 1);
  else
    cblas_dgemv(CblasRowMajor, op, m, n, 1.0, pa, a.ld, x, incx, 0.0, y, 1);
}

BlasOperand transposed(BlasOperand b) { return {!b.trans, b.ld}; }

// c[B, M, N] = a[B, M, K] @ b[B, K, N] through BLAS (both layouts BLAS-readable).
template <class T>
void blas_batched(const Matrices& a, const Matrices& b, const T* pa, const T* pb, T* c) {
  const auto la = *blas_operand(a), lb = *blas_operand(b);
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  for (int64_t i = 0; i < a.batch; ++i) {
    const T* ai = pa + i * a.batch_stride;
    const T* bi = pb + i * b.batch_stride;
    T* ci = c + i * M * N;
    // Matrix-vector products: gemv streams the matrix once, gemm would pack it.
    if (N == 1 && b.row_stride > 0) blas_gemv(la, M, K, ai, bi, b.row_stride, ci);
    else if (M == 1 && a.col_stride > 0) blas_gemv(transposed(lb), N, K, bi, ai, a.col_stride, ci);
    else blas_gemm(la, lb, M, N, K, ai, bi, ci);
  }
}

// c[i, :] += a[i, p] * b[p, :] over packed operands: vectorises along the row.
template <class T>
void loop_batched(const Tensor& a, const Tensor& b, T* c) {
  const int64_t B = a.shape()[0], M = a.shape()[1], K = a.shape()[2], N = b.shape()[2];
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  std::fill(c, c + B * M * N, T(0));
  for (int64_t i = 0; i < B; ++i)
    for (int64_t m = 0; m < M; ++m) {
      T* row = c + (i * M + m) * N;
      for (int64_t p = 0; p < K; ++p) {
        const T av = pa[(i * M + m) * K + p];
        const T* brow = pb + (i * K + p) * N;
        if constexpr (std::is_same_v<T, bool>) {
          if (av) for (int64_t j = 0; j < N; ++j) row[j] = row[j] | brow[j];
        } else {
          for (int64_t j = 0; j < N; ++j) row[j] = static_cast<T>(row[j] + av * brow[j]);
        }
      }
    }
}

// The operand as BLAS reads it: itself when its strides allow, else packed.
std::pair<Tensor, Matrices> blas_readable(const Tensor& t, const IntList& batch, const IntList& rows,
                                          const IntList& cols) {
  auto m = as_matrices(t, batch, rows, cols);
  if (m && blas_operand(*m)) return {t, *m};
  Tensor p = packed(t, batch, rows, cols);
  return {p, packed_matrices(p)};
}

Tensors dot_general_kernel(const Tensors& in, const Params& params, const Avals& out) {
  // Operands are computed in the result type, except that a product of floats
  // wanted as integers is computed in floats and converted, as XLA does.
  const DType in_dt = higher_precision(in[0].dtype(), in[1].dtype());
  const DType dt = is_floating(in_dt) && !is_floating(out[0].dtype) ? in_dt : out[0].dtype;
  const Tensor x = cast(in[0], dt), y = cast(in[1], dt);
  const DotDims d = dot_dims(params, x.ndim(), y.ndim());
  Tensor result = Tensor::empty(dt, out[0].shape);
  if (result.size() == 0) return {cast(result, out[0].dtype)};
  if (!is_floating(dt)) {
    dispatch_bitwise(dt, [&](auto tag) {
      loop_batched(packed(x, d.lhs_batch, d.lhs_free, d.lhs_contract),
                   packed(y, d.rhs_batch, d.rhs_contract, d.rhs_free), result.data<decltype(tag)>());
    });
    return {result};
  }
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    T* c = result.data<T>();
    if (x.size() == 0 || y.size() == 0) {  // an empty contraction
      std::fill(c, c + result.size(), T(0));
      return;
    }
    auto [a, ma] = blas_readable(x, d.lhs_batch, d.lhs_free, d.lhs_contract);
    auto [b, mb] = blas_readable(y, d.rhs_batch, d.rhs_contract, d.rhs_free);
    blas_batched<T>(ma, mb, a.template data<T>(), b.template data<T>(), c);
  });
  return {cast(result, out[0].dtype)};
}

// ---- VJP -------------------------------------------------------------------
// JAX's transpose rules: the cotangent of x is g contracted with y over y's
// free dims, then transposed into x's layout.

IntList range_of(int64_t start, size_t n) {
  IntList r(n);
  for (size_t i = 0; i < n; ++i) r[i] = start + static_cast<int64_t>(i);
  return r;
}

IntList argsort(const IntList& v) {
  IntList idx = range_of(0, v.size());
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return v[a] < v[b]; });
  return idx;
}

// `swap_ans`: g's free dims come y-first (the rhs case, with x and y swapped).
Value dot_transpose_lhs(const Value& g, const Value& x, const Value& y, const IntList& x_contract,
                        const IntList& y_contract, const IntList& x_batch, const IntList& y_batch,
                        bool swap_ans) {
  const int64_t x_ndim = aval_of(x).ndim(), y_ndim = aval_of(y).ndim();
  const IntList x_kept = free_dims(x_ndim, x_contract, x_batch);
  const IntList y_kept = free_dims(y_ndim, y_contract, y_batch);
  const int64_t nb = static_cast<int64_t>(x_batch.size());
  const IntList ans_batch = range_of(0, x_batch.size());
  const IntList ans_y = swap_ans ? range_of(nb, y_kept.size())
                                 : range_of(nb + static_cast<int64_t>(x_kept.size()), y_kept.size());
  IntList x_contract_by_y;
  for (int64_t i : argsort(y_contract)) x_contract_by_y.push_back(x_contract[i]);
  IntList order = x_batch;
  order.insert(order.end(), x_kept.begin(), x_kept.end());
  order.insert(order.end(), x_contract_by_y.begin(), x_contract_by_y.end());
  const Value prod = ops::dot_general(g, y, {ans_y, y_kept, ans_batch, y_batch});
  return ops::cast_like(ops::transpose(prod, argsort(order)), aval_of(x));
}

Cotangents dot_general_vjp(const VjpArgs& a) {
  const Value &g = *a.ct[0], &x = a.in[0], &y = a.in[1];
  const DotDims d = dot_dims(a.params, aval_of(x).ndim(), aval_of(y).ndim());
  Cotangents ct(2);
  if (a.wants[0])
    ct[0] = dot_transpose_lhs(g, x, y, d.lhs_contract, d.rhs_contract, d.lhs_batch, d.rhs_batch, false);
  if (a.wants[1])
    ct[1] = dot_transpose_lhs(g, y, x, d.rhs_contract, d.lhs_contract, d.rhs_batch, d.lhs_batch, true);
  return ct;
}

}  // namespace

void register_linalg_primitives() {
  Primitive p;
  p.name = "dot_general";
  p.abstract_eval = dot_general_eval;
  p.kernel = dot_general_kernel;
  p.vjp = dot_general_vjp;
  register_primitive(std::move(p));
}

}  // namespace meshsim
