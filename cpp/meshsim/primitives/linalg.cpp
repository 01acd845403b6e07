// dot_general: contraction over named dimensions, batched. Floats go to BLAS
// (gemm, gemv for matrix-vector) reading operands in place whenever their
// strides let a BLAS transpose flag stand in for a copy; integers and bools
// use a vectorised loop. ragged_dot_general (MoE expert products,
// ragged_dot.cpp) runs per group through the same kernel.
#include <cblas.h>

#include <algorithm>
#include <optional>
#include <set>

#include "meshsim/ir/printing.h"
#include "meshsim/core/cancel.h"
#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/kernels/cast.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/gemm.h"
#include "meshsim/kernels/library_dot_order.h"
#include "meshsim/primitives/convolution.h"
#include "meshsim/primitives/dot_general.h"
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/fft.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace dot_parts {

// ---- dimension numbers and type rules ------------------------------------

IntList free_dims(int64_t ndim, const IntList& a, const IntList& b) {
  IntList f;
  f.reserve(ndim);
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
  if (is_complex(dt)) return 2000 + bits;
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
  if (!is_inexact(dt) && preferred != dt && static_cast<int>(itemsize(preferred) * 8) < bits)
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

}  // namespace dot_parts

namespace {
using namespace dot_parts;

// ---- operand layouts ---------------------------------------------------------

// An operand seen as a batch of matrices: element (b, r, c) at
// data + b * batch_stride + r * row_stride + c * col_stride.
// Batch dims whose strides do not merge into one (attention's batch and head
// dims around the sequence dim) list each matrix's offset instead.
struct Matrices {
  int64_t batch, rows, cols;
  int64_t batch_stride, row_stride, col_stride;
  std::vector<int64_t> batch_offsets;  // empty when batch_stride applies
  int64_t offset(int64_t i) const { return batch_offsets.empty() ? i * batch_stride : batch_offsets[i]; }
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
  if (!r || !c) return std::nullopt;
  if (b) return Matrices{b->first, r->first, c->first, b->second, r->second, c->second, {}};
  // Each matrix's offset, the batch dims walked row-major in the order given.
  std::vector<int64_t> offsets{0};
  for (int64_t d : batch) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * t.shape()[d]);
    for (int64_t o : offsets)
      for (int64_t k = 0; k < t.shape()[d]; ++k) next.push_back(o + k * t.strides()[d]);
    offsets = std::move(next);
  }
  const int64_t count = static_cast<int64_t>(offsets.size());
  return Matrices{count, r->first, c->first, 0, r->second, c->second, std::move(offsets)};
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
  return {p.shape()[0], r, c, r * c, c, 1, {}};
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

// A product is computed in blocks of rows of about this many multiply-adds
// (tens of milliseconds), with a cancel check before each: Ctrl-C stops a huge
// product within one block instead of at its end. Each block is one BLAS call
// whose threads wait for each other at its end, and on a loaded machine each
// such wait may last until a descheduled thread runs again, so blocks are as
// large as the interrupt latency allows (the notebook's 1024x4096 @ 4096x256
// is one call, not four).
constexpr int64_t kCancelBlockMacs = int64_t{1} << 30;

template <class T>
void blas_gemm(const BlasOperand& a, const BlasOperand& b, int64_t m, int64_t n, int64_t k,
               const T* pa, const T* pb, T* c) {
  auto op = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
  const int64_t rows = std::max<int64_t>(32, kCancelBlockMacs / std::max<int64_t>(1, n * k));
  for (int64_t r = 0; r < m; r += rows) {
    check_cancelled();
    const int64_t mr = std::min(rows, m - r);
    // Row r of op(A): row r of A, or column r of a transposed A.
    const T* ar = pa + (a.trans ? r : r * a.ld);
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, op(a.trans), op(b.trans), mr, n, k, 1.0f, ar, a.ld, pb, b.ld, 0.0f,
                  c + r * n, n);
    } else if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasRowMajor, op(a.trans), op(b.trans), mr, n, k, 1.0, ar, a.ld, pb, b.ld, 0.0,
                  c + r * n, n);
    } else {  // complex: plain transposes, never conjugated
      const T one(1), zero(0);
      if constexpr (std::is_same_v<T, complex64>)
        cblas_cgemm(CblasRowMajor, op(a.trans), op(b.trans), mr, n, k, &one, ar, a.ld, pb, b.ld, &zero,
                    c + r * n, n);
      else
        cblas_zgemm(CblasRowMajor, op(a.trans), op(b.trans), mr, n, k, &one, ar, a.ld, pb, b.ld, &zero,
                    c + r * n, n);
    }
  }
}

// y = op(A) x, A stored rows x cols as described by `a`.
template <class T>
void blas_gemv(const BlasOperand& a, int64_t rows, int64_t cols, const T* pa, const T* x,
               int64_t incx, T* y) {
  const auto op = a.trans ? CblasTrans : CblasNoTrans;
  // A transposed operand is stored as a cols x rows row-major matrix.
  const int64_t m = a.trans ? cols : rows, n = a.trans ? rows : cols;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemv(CblasRowMajor, op, m, n, 1.0f, pa, a.ld, x, incx, 0.0f, y, 1);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemv(CblasRowMajor, op, m, n, 1.0, pa, a.ld, x, incx, 0.0, y, 1);
  } else {
    const T one(1), zero(0);
    if constexpr (std::is_same_v<T, complex64>)
      cblas_cgemv(CblasRowMajor, op, m, n, &one, pa, a.ld, x, incx, &zero, y, 1);
    else
      cblas_zgemv(CblasRowMajor, op, m, n, &one, pa, a.ld, x, incx, &zero, y, 1);
  }
}

BlasOperand transposed(BlasOperand b) { return {!b.trans, b.ld}; }

// c[B, M, N] = a[B, M, K] @ b[B, K, N] through BLAS (both layouts BLAS-readable):
// complex products.
template <class T>
void blas_batched(const Matrices& a, const Matrices& b, const T* pa, const T* pb, T* c) {
  const auto la = *blas_operand(a), lb = *blas_operand(b);
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  for (int64_t i = 0; i < a.batch; ++i) {
    check_cancelled();
    const T* ai = pa + a.offset(i);
    const T* bi = pb + b.offset(i);
    T* ci = c + i * M * N;
    // Matrix-vector products: gemv streams the matrix once, gemm would pack it.
    if (N == 1 && b.row_stride > 0) blas_gemv(la, M, K, ai, bi, b.row_stride, ci);
    else if (M == 1 && a.col_stride > 0) blas_gemv(transposed(lb), N, K, bi, ai, a.col_stride, ci);
    else blas_gemm(la, lb, M, N, K, ai, bi, ci);
  }
}

// c[B, M, N] = a[B, M, K] @ b[B, K, N] for float32 and float64, each element
// summed over k in ordered_gemm's default order (kernels/gemm.h), or in the
// order of XLA's dot library for the column groups `library` gives (when
// that option is on: a device's shard of a sharded product then has the bits
// XLA gives that device's product). Neither depends on the processor or the
// thread count.
// Many small products run in parallel when together they are worth
// splitting (2^18 multiply-adds in all); a
// few tiny ones (a device's attention heads) run on the calling thread,
// where starting tasks would cost more than the products; a large one
// splits itself.
template <class T>
void ordered_batched(const Matrices& a, const Matrices& b, const T* pa, const T* pb, T* c,
                     const std::optional<std::vector<ColumnsOrder>>& library) {
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  auto one = [&](int64_t i) {
    const StridedMatrix<T> ai{pa + a.offset(i), a.row_stride, a.col_stride};
    if (!library) {
      ordered_gemm(M, N, K, ai, StridedMatrix<T>{pb + b.offset(i), b.row_stride, b.col_stride}, c + i * M * N, N);
      return;
    }
    for (const ColumnsOrder& group : *library)
      ordered_gemm(M, group.end - group.begin, K, ai,
                   StridedMatrix<T>{pb + b.offset(i) + group.begin * b.col_stride, b.row_stride, b.col_stride},
                   c + i * M * N + group.begin, N, group.order);
  };
  const int64_t macs = M * N * K;
  if (a.batch > 1 && macs < (int64_t{1} << 16) && a.batch * macs >= (int64_t{1} << 18)) {
    parallel_as_caller(a.batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        check_cancelled();
        one(i);
      }
    });
    return;
  }
  for (int64_t i = 0; i < a.batch; ++i) {
    check_cancelled();
    one(i);
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
      check_cancelled();
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
// `t` is not copied (a Tensor copy allocates its shape and strides): the
// result points at it, or at the packed copy kept in `packed_copy`.
std::pair<const Tensor*, Matrices> blas_readable(const Tensor& t, const IntList& batch, const IntList& rows,
                                                 const IntList& cols, Tensor& packed_copy) {
  auto m = as_matrices(t, batch, rows, cols);
  if (m && blas_operand(*m)) return {&t, *m};
  packed_copy = packed(t, batch, rows, cols);
  return {&packed_copy, packed_matrices(packed_copy)};
}

// The operand read through its strides when its dims merge into a batch of
// matrices, else packed.
std::pair<const Tensor*, Matrices> strided_readable(const Tensor& t, const IntList& batch, const IntList& rows,
                                                    const IntList& cols, Tensor& packed_copy) {
  if (auto m = as_matrices(t, batch, rows, cols)) return {&t, *m};
  packed_copy = packed(t, batch, rows, cols);
  return {&packed_copy, packed_matrices(packed_copy)};
}

}  // namespace

namespace dot_parts {

// The product as XLA's dot library would see it. XLA first transposes an
// operand whose batch dims are not its leading dims into the canonical
// layout (batch, free, contracted for the lhs; batch, contracted, free for
// the rhs). The library then takes an lhs with its contracted dims after its
// free dims (XLA computes other layouts itself), and an rhs with them before
// its free dims or after them (transposed: the library repacks it).
std::optional<LibraryDotShape> library_dot_shape(const DotDims& d, const Matrices& a, const Matrices& b) {
  auto all_before = [](const IntList& first, const IntList& second) {
    return first.empty() || second.empty() ||
           *std::max_element(first.begin(), first.end()) < *std::min_element(second.begin(), second.end());
  };
  auto leading = [](const IntList& batch) {
    for (size_t i = 0; i < batch.size(); ++i)
      if (batch[i] != static_cast<int64_t>(i)) return false;
    return true;
  };
  if (d.lhs_free.empty() || d.rhs_free.empty()) return std::nullopt;
  if (leading(d.lhs_batch) && !all_before(d.lhs_free, d.lhs_contract)) return std::nullopt;
  const bool transposed = leading(d.rhs_batch) && !all_before(d.rhs_contract, d.rhs_free);
  if (transposed && !all_before(d.rhs_free, d.rhs_contract)) return std::nullopt;
  return LibraryDotShape{a.rows, a.cols, b.cols, transposed};
}

// Operands are computed in the result type, except that a product of floats
// wanted as integers is computed in floats and converted, as XLA does, and
// that narrow floats (bfloat16, float16, float8) are multiplied and
// accumulated in float32, then rounded once to the result type.
DType dot_compute_dtype(DType in_dt, DType out_dt) {
  const DType dt = is_inexact(in_dt) && !is_inexact(out_dt) ? in_dt : out_dt;
  return is_narrow_float(dt) ? DType::Float32 : dt;
}

Tensors dot_general_kernel(const Tensors& in, const Params& params, const Avals& out) {
  const DType in_dt = higher_precision(in[0].dtype(), in[1].dtype());
  const DType dt = dot_compute_dtype(in_dt, out[0].dtype);
  Tensor x_cast, y_cast;
  const Tensor &x = in_dtype(in[0], dt, x_cast), &y = in_dtype(in[1], dt, y_cast);
  const DotDims d = dot_dims(params, x.ndim(), y.ndim());
  Tensor result = Tensor::empty(dt, out[0].shape);
  if (result.size() == 0) return as_tensors(cast(std::move(result), out[0].dtype));
  if (!is_inexact(dt)) {
    dispatch_bitwise(dt, [&](auto tag) {
      loop_batched(packed(x, d.lhs_batch, d.lhs_free, d.lhs_contract),
                   packed(y, d.rhs_batch, d.rhs_contract, d.rhs_free), result.data<decltype(tag)>());
    });
    return as_tensors(std::move(result));
  }
  dispatch_wide_inexact(dt, [&](auto tag) {
    using T = decltype(tag);
    T* c = result.data<T>();
    if (x.size() == 0 || y.size() == 0) {  // an empty contraction
      std::fill(c, c + result.size(), T(0));
      return;
    }
    Tensor a_packed, b_packed;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      auto [a, ma] = strided_readable(x, d.lhs_batch, d.lhs_free, d.lhs_contract, a_packed);
      auto [b, mb] = strided_readable(y, d.rhs_batch, d.rhs_contract, d.rhs_free, b_packed);
      std::optional<std::vector<ColumnsOrder>> library;
      if (library_dot_order_enabled() && in[0].dtype() == DType::Float32 && in[1].dtype() == DType::Float32 &&
          out[0].dtype == DType::Float32)
        if (const auto shape = library_dot_shape(d, ma, mb)) library = library_dot_order(*shape);
      ordered_batched<T>(ma, mb, a->template data<T>(), b->template data<T>(), c, library);
    } else {
      auto [a, ma] = blas_readable(x, d.lhs_batch, d.lhs_free, d.lhs_contract, a_packed);
      auto [b, mb] = blas_readable(y, d.rhs_batch, d.rhs_contract, d.rhs_free, b_packed);
      blas_batched<T>(ma, mb, a->template data<T>(), b->template data<T>(), c);
    }
  });
  return as_tensors(cast(std::move(result), out[0].dtype));
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

}  // namespace dot_parts

namespace {

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
  // The product is laid out as x's type permuted into its order, so the
  // transpose gives x's sharding (contractions of sharded dims then reduce;
  // an unsharded x, e.g. a replicated weight, gets a replicated cotangent).
  const Aval xa = aval_of(x);
  std::optional<Spec> out_sharding;
  if (xa.mesh || aval_of(g).mesh || aval_of(y).mesh) {
    out_sharding.emplace();
    for (int64_t d : order)
      out_sharding->push_back(xa.mesh && d < static_cast<int64_t>(xa.spec.size()) ? xa.spec[d] : AxisNames{});
  }
  // Cotangent types follow primal types: a primal reduced over some axes (equal blocks that
  // each device used with its own data) has its cotangent unreduced there, JAX's pending sum.
  IntLists dims{ans_y, y_kept, ans_batch, y_batch};
  const Value prod = xa.reduced.empty()
                         ? ops::dot_general(g, y, dims, std::nullopt, out_sharding)
                         : ops::bind1("dot_general", {g, y},
                                      {{"dimension_numbers", dims},
                                       {"precision", std::monostate{}},
                                       {"preferred_element_type", std::monostate{}},
                                       {"out_sharding", std::vector<StrList>(*out_sharding)},
                                       {"out_unreduced", StrList(xa.reduced)}});
  return ops::cast_like(ops::transpose(prod, argsort(order)), xa);
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

// Both operands batched: a new leading batch dimension of the product. One
// batched: its batch dimension is a free one, which the result keeps after
// the batch dimensions (lhs) or after the lhs's free dimensions (rhs).
Batched dot_general_batch(const BatchArgs& a) {
  const IntLists& dn = a.params.get<IntLists>("dimension_numbers");
  const bool lb = a.dims[0] != kNotBatched, rb = a.dims[1] != kNotBatched;
  IntLists d{shift_axes(dn[0], lb), shift_axes(dn[1], rb), shift_axes(dn[2], lb), shift_axes(dn[3], rb)};
  int64_t out_dim = static_cast<int64_t>(dn[2].size());
  if (lb && rb) {
    d[2].insert(d[2].begin(), 0);
    d[3].insert(d[3].begin(), 0);
    out_dim = 0;
  } else if (rb) {
    out_dim += aval_of(a.in[0]).ndim() - static_cast<int64_t>(dn[0].size() + dn[2].size());
  }
  Params params = a.params;
  params.set("dimension_numbers", d);
  Values out = meshsim::bind(a.prim, {lb ? batch_at(a.in[0], a.dims[0], 0, a.size) : a.in[0],
                             rb ? batch_at(a.in[1], a.dims[1], 0, a.size) : a.in[1]}, params);
  return {out, {out_dim}};
}

// ---- sharding in types: rules and local plans (sharding/rules.h) ----------------

struct DotSpecDims {
  IntList lc, rc, lb, rb, lf, rf;
};

IntList free_of(int64_t ndim, const IntList& a, const IntList& b) {
  IntList f;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
      f.push_back(d);
  return f;
}

DotSpecDims dot_spec_dims(const Params& p, const Aval& l, const Aval& r) {
  const IntLists& dn = p.get<IntLists>("dimension_numbers");
  DotSpecDims d{dn[0], dn[1], dn[2], dn[3], {}, {}};
  d.lf = free_of(l.ndim(), d.lc, d.lb);
  d.rf = free_of(r.ndim(), d.rc, d.rb);
  return d;
}

Spec pick_specs(const Spec& s, const IntList& dims) {
  Spec out;
  for (int64_t d : dims) out.push_back(s[d]);
  return out;
}

void check_specs_match(const Spec& a, const Spec& b, const std::string& msg) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (!a[i].empty() && !b[i].empty() && a[i] != b[i]) fail<ShardingTypeError>(msg);
}

std::vector<Spec> dot_general_rule(const Avals& in, const Params& p, const Avals& out) {
  const Aval &l = in[0], &r = in[1];
  if (l.mesh && r.mesh && !same_abstract_mesh(*l.mesh, *r.mesh))
    fail<ShardingTypeError>("Mesh of both lhs and rhs should match. Got lhs: ",
                            abstract_mesh_repr(*l.mesh), " and rhs: ", abstract_mesh_repr(*r.mesh));
  if (auto os = out_sharding_param(p, out[0].shape.size())) return {*os};
  const DotSpecDims d = dot_spec_dims(p, l, r);
  const Spec ls = spec_of(l), rs = spec_of(r);
  const Spec lcs = pick_specs(ls, d.lc), rcs = pick_specs(rs, d.rc), lbs = pick_specs(ls, d.lb), rbs = pick_specs(rs, d.rb);
  check_specs_match(lbs, rbs, "dot_general requires lhs batch dimensions and rhs batch dimensions "
                              "to have the consistent sharding, got " + py_spec_tuple(lbs) + " and " +
                              py_spec_tuple(rbs) + ".");
  check_specs_match(lcs, rcs, "dot_general requires contracting dimensions to have consistent "
                              "sharding, got " + py_spec_tuple(lcs) + " and " + py_spec_tuple(rcs) + ".");
  for (size_t i = 0; i < lcs.size(); ++i)
    if (!lcs[i].empty() && !rcs[i].empty())
      fail<ShardingTypeError>("Contracting dimensions are sharded and it is ambiguous how the output "
                              "should be sharded. Please specify the output sharding via the "
                              "`out_sharding` parameter. Got lhs_contracting_spec=", py_spec_tuple(lcs),
                              " and rhs_contracting_spec=", py_spec_tuple(rcs));
  Spec o = lbs;
  for (int64_t f : d.lf) o.push_back(ls[f]);
  for (int64_t f : d.rf) o.push_back(rs[f]);
  return {o};
}

// Pending reductions: operands cannot be unreduced; `out_unreduced` (the
// unreduced axes of `out_sharding`) keeps the partial sums over exactly the
// axes both operands' contracting dimensions are sharded over.
UrAxes dot_general_ur_rule(const Avals& in, const Params& p) {
  const Aval &l = in[0], &r = in[1];
  if (!l.unreduced.empty() || !r.unreduced.empty())
    fail<ShardingTypeError>("lhs or rhs passed to dot_general cannot be unreduced. Got lhs=", l.repr(),
                            " and rhs=", r.repr());
  const AxisNames unreduced = named_axes_param(p, "out_unreduced");
  if (unreduced.empty()) return {};
  const DotSpecDims d = dot_spec_dims(p, l, r);
  const Spec lcs = pick_specs(spec_of(l), d.lc), rcs = pick_specs(spec_of(r), d.rc);
  if (lcs != rcs)
    fail<ShardingTypeError>("lhs and rhs contracting dims should be sharded identically when out_sharding "
                            "provided to dot_general mentions unreduced_axes. Got lhs_contracting_spec=",
                            py_spec_tuple(lcs), ", rhs_contracting_spec=", py_spec_tuple(rcs));
  AxisNames contracted;
  for (const auto& e : lcs) contracted.insert(contracted.end(), e.begin(), e.end());
  AxisNames want = unreduced, have = contracted;
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  if (want != have)
    fail<ShardingTypeError>("out_sharding's unreduced axes should be equal to the contracting specs. Got "
                            "unreduced axes=", py_axis_set(unreduced), " and contracting spec=", py_spec_tuple(lcs));
  return {l.mesh ? l.mesh->in_mesh_order(unreduced) : unreduced, AxisNames{}};
}

// Each device multiplies its blocks: a contracting dimension sharded on one
// side only is all-gathered there (FSDP); sharded alike on both sides it
// yields partial sums, all-reduced; the result is then resharded to the type.
// A free dim the result's type splits over axes the plan leaves unused is
// split in its operand first (a local slice), so the partial sums are
// all-reduced block by block, as XLA's program does.
std::optional<LocalPlan> dot_general_plan(const Avals& in, const Params& p, const Avals& out) {
  const DotSpecDims d = dot_spec_dims(p, in[0], in[1]);
  Spec ls = spec_of(in[0]), rs = spec_of(in[1]);
  LocalPlan plan;
  for (size_t i = 0; i < d.lc.size(); ++i) {
    AxisNames &l = ls[d.lc[i]], &r = rs[d.rc[i]];
    if (!l.empty() && l == r) {
      plan.reduce_axes.insert(plan.reduce_axes.end(), l.begin(), l.end());
    } else {
      l.clear();
      r.clear();
    }
  }
  for (size_t i = 0; i < d.lb.size(); ++i) rs[d.rb[i]] = ls[d.lb[i]];
  std::set<std::string> used(plan.reduce_axes.begin(), plan.reduce_axes.end());
  Spec o;
  for (int64_t b : d.lb) o.push_back(ls[b]);
  for (int64_t f : d.lf) o.push_back(ls[f]);
  for (const auto& e : o) used.insert(e.begin(), e.end());
  for (int64_t f : d.rf) {
    bool clash = false;
    for (const auto& a : rs[f]) clash |= used.count(a) > 0;
    if (clash) rs[f].clear();  // an axis cannot shard two result dimensions: gather this one
    for (const auto& a : rs[f]) used.insert(a);
    o.push_back(rs[f]);
  }
  if (!plan.reduce_axes.empty() && out.size() == 1 && out[0].mesh) {
    const Spec want = pad_spec(out[0].spec, o.size());
    const size_t nb = d.lb.size(), nl = d.lf.size();
    for (size_t k = nb; k < o.size(); ++k) {
      if (!o[k].empty() || want[k].empty()) continue;
      bool free_axes = true;
      for (const auto& a : want[k]) free_axes &= used.count(a) == 0 && std::find(out[0].unreduced.begin(), out[0].unreduced.end(), a) == out[0].unreduced.end();
      if (!free_axes) continue;
      (k < nb + nl ? ls[d.lf[k - nb]] : rs[d.rf[k - nb - nl]]) = want[k];
      o[k] = want[k];
      used.insert(want[k].begin(), want[k].end());
    }
  }
  plan.in_specs = {ls, rs};
  plan.params = p;
  plan.out_specs = {o};
  return plan;
}

// Sharding propagation over Auto axes: batch dims share a factor across both
// operands and the result, free dims pass to the result, contracting dims
// share a factor of the operands alone (sharded, the products are partial sums).
std::optional<FactorMap> dot_general_factors(const Avals& in, const Params& params, const Avals& out) {
  const DotDims d = dot_dims(params, in[0].ndim(), in[1].ndim());
  FactorMap m = blank_factors(in, out);
  size_t o = 0;
  for (size_t i = 0; i < d.lhs_batch.size(); ++i, ++o)
    m.in[0][d.lhs_batch[i]] = m.in[1][d.rhs_batch[i]] = m.out[0][o] = m.num_factors++;
  for (int64_t k : d.lhs_free) m.in[0][k] = m.out[0][o++] = m.num_factors++;
  for (int64_t k : d.rhs_free) m.in[1][k] = m.out[0][o++] = m.num_factors++;
  for (size_t i = 0; i < d.lhs_contract.size(); ++i)
    m.in[0][d.lhs_contract[i]] = m.in[1][d.rhs_contract[i]] = m.num_factors++;
  return m;
}

}  // namespace

void register_linalg_primitives() {
  Primitive p;
  p.name = "dot_general";
  p.operands = exactly(2);
  p.uses_blas = true;
  p.sharding_rule = dot_general_rule;
  p.local_plan = dot_general_plan;
  p.factors = dot_general_factors;
  p.abstract_eval = dot_general_eval;
  p.kernel = dot_general_kernel;
  p.vjp = dot_general_vjp;
  // A multiply and an add per output element and contracted index.
  p.cost = [](const Avals& in, const Params& params, const Avals& out) {
    Cost c = memory_cost(in, out);
    double contracted = 1;
    for (int64_t d : dot_dims(params, in[0].ndim(), in[1].ndim()).lhs_contract) contracted *= in[0].shape[d];
    c.flops = 2 * contracted * static_cast<double>(num_elements(out[0].shape));
    return c;
  };
  p.batch = dot_general_batch;
  p.ur_rule = dot_general_ur_rule;
  // JAX's pp rule: dimension_numbers as ((lhs_contract, rhs_contract), (lhs_batch,
  // rhs_batch)) of lists; out_sharding and unset params hidden.
  p.print_rule = [](PrintedEquation& e) {
    e.hide("out_sharding");
    e.params.erase(std::remove_if(e.params.begin(), e.params.end(),
                                  [](const PrintedParam& q) { return std::holds_alternative<std::monostate>(q.value); }),
                   e.params.end());
    if (const auto* d = std::get_if<IntLists>(e.find("dimension_numbers")); d && d->size() == 4)
      e.spell("dimension_numbers", "((" + python_list_str((*d)[0]) + ", " + python_list_str((*d)[1]) + "), (" +
                                       python_list_str((*d)[2]) + ", " + python_list_str((*d)[3]) + "))");
  };
  // Saved by JAX's dots policies; dots_with_no_batch_dims_saveable asks for no batch dims.
  p.saved_as_dot = [](const Params& params) {
    const IntLists& dn = params.get<IntLists>("dimension_numbers");
    return dn[2].empty() && dn[3].empty();
  };
  register_primitive(std::move(p));
  register_ragged_dot_primitive();
  register_convolution_primitives();
  register_fft_primitive();
}

}  // namespace meshsim
