// ragged_dot_general (MoE expert products): its groups run as dot_generals
// through dot_general's kernel (dot_general.h), and its VJP is JAX's.
#include <cblas.h>

#include <algorithm>
#include <initializer_list>

#include "meshsim/ir/printing.h"
#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/cast.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/dot_general.h"
#include "meshsim/primitives/families.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {

using namespace dot_parts;

// JAX's three modes, by the kind of the lhs ragged dimension r (groups are
// consecutive runs of r, sized by group_sizes; rows past their sum are zero):
//   noncontracting  [b,m,k] x [g,b,k,n] -> [b,m,n]    rows of group i use rhs[i]
//   contracting     [b,m,k] x [b,k,n]   -> [g,b,m,n]  result i sums group i's k
//   batch           plain dot_general (group_sizes unused, as JAX computes it)
// Params: ragged_dot_dimension_numbers = (lc, rc, lb, rb, lhs_ragged, rhs_group).

enum class RaggedMode { Noncontracting, Contracting, Batch };

struct RaggedDims {
  DotDims dot;
  IntList lhs_ragged, rhs_group;
};

bool contains(const IntList& l, int64_t x) { return std::find(l.begin(), l.end(), x) != l.end(); }
int64_t index_of(const IntList& l, int64_t x) { return std::find(l.begin(), l.end(), x) - l.begin(); }

RaggedDims ragged_dims(const Params& params, int64_t lhs_ndim, int64_t rhs_ndim) {
  const IntLists& dn = params.get<IntLists>("ragged_dot_dimension_numbers");
  if (dn.size() != 6)
    fail<TypeError>("ragged_dot_general ragged_dot_dimension_numbers must be (lhs_contract, "
                    "rhs_contract, lhs_batch, rhs_batch, lhs_ragged, rhs_group), got ",
                    param_value_str(dn));
  RaggedDims d{{dn[0], dn[1], dn[2], dn[3], {}, {}}, dn[4], dn[5]};
  d.dot.lhs_free = free_dims(lhs_ndim, d.dot.lhs_contract, d.dot.lhs_batch);
  IntList taken = d.dot.rhs_contract;
  taken.insert(taken.end(), d.rhs_group.begin(), d.rhs_group.end());
  d.dot.rhs_free = free_dims(rhs_ndim, taken, d.dot.rhs_batch);
  return d;
}

RaggedMode ragged_mode(const RaggedDims& d) {
  const int64_t r = d.lhs_ragged[0];
  if (contains(d.dot.lhs_contract, r)) return RaggedMode::Contracting;
  if (contains(d.dot.lhs_batch, r)) return RaggedMode::Batch;
  return RaggedMode::Noncontracting;
}

// The lhs dims group_sizes is indexed by before its group dim (JAX's prefix dims).
IntList ragged_prefix(const RaggedDims& d, RaggedMode mode) {
  const int64_t r = d.lhs_ragged[0];
  const IntList& lb = d.dot.lhs_batch;
  auto before = [&](const IntList& l) { return IntList(l.begin(), l.begin() + index_of(l, r)); };
  IntList prefix = mode == RaggedMode::Batch ? before(lb) : lb;
  if (mode == RaggedMode::Batch) return prefix;
  const IntList rest = before(mode == RaggedMode::Contracting ? d.dot.lhs_contract : d.dot.lhs_free);
  prefix.insert(prefix.end(), rest.begin(), rest.end());
  return prefix;
}

// The dot_general these dims describe (the rhs group dim left free).
Params dot_params_of(const RaggedDims& d, const Params& params) {
  Params p{{"dimension_numbers",
            IntLists{d.dot.lhs_contract, d.dot.rhs_contract, d.dot.lhs_batch, d.dot.rhs_batch}}};
  p.set("preferred_element_type", params.is_none("preferred_element_type")
                                      ? ParamValue(std::monostate{})
                                      : ParamValue(params.get<DType>("preferred_element_type")));
  return p;
}

// JAX's _ragged_dot_general_shape_rule and dtype rule, with their messages.
Avals ragged_dot_general_eval(const Avals& in, const Params& params) {
  const Aval &lhs = in[0], &rhs = in[1], &gs = in[2];
  const RaggedDims d = ragged_dims(params, lhs.ndim(), rhs.ndim());
  auto check_in_range = [](int64_t dim, int64_t rank, const char* dim_name, const char* arg) {
    if (dim < 0 || dim >= rank)
      fail<TypeError>("ragged_dot_general requires ", dim_name, " numbers to be nonnegative and "
                      "less than the number of axes of the ", arg, " value, got ", dim, " for ",
                      arg, " of rank ", rank, ".");
  };
  if (d.lhs_ragged.size() != 1)
    fail<TypeError>("ragged_dot_general expects exactly one lhs ragged dimension.");
  const int64_t r = d.lhs_ragged[0];
  check_in_range(r, lhs.ndim(), "lhs ragged dimension", "lhs");
  const RaggedMode mode = ragged_mode(d);
  if (gs.ndim() == 0) fail<TypeError>("expected rank of group_sizes to be >=1.");
  if (gs.ndim() != 1) {
    dot_general_eval({lhs, rhs}, dot_params_of(d, params));  // the prefix dims exist
    Shape expected = sizes(lhs.shape, ragged_prefix(d, mode));
    expected.push_back(gs.shape.back());
    if (gs.shape != expected)
      fail<TypeError>("expected group_sizes to have shape ", shape_str(expected), ", got ",
                      shape_str(gs.shape), ".");
  }
  const int64_t groups = gs.shape.back();
  if (mode != RaggedMode::Noncontracting) {
    if (!d.rhs_group.empty())
      fail<TypeError>("ragged_dot_general requires zero group dimensions in the rhs when lhs "
                      "ragged dimension is contracting or batch.");
  } else {
    if (d.rhs_group.size() != 1)
      fail<TypeError>("ragged_dot_general requires exactly one rhs group dimension when lhs "
                      "ragged dimension is noncontracting.");
    const int64_t g = d.rhs_group[0];
    check_in_range(g, rhs.ndim(), "rhs group dimension", "rhs");
    if (contains(d.dot.rhs_batch, g) || contains(d.dot.rhs_contract, g))
      fail<TypeError>("ragged_dot_general requires rhs group dimension numbers to be distinct "
                      "from contracting and batch dimensions.");
    if (rhs.shape[g] != groups)
      fail<TypeError>("expected rhs group dimension size to be ", groups, ", got ", rhs.shape[g], ".");
  }
  Aval out = dot_general_eval({lhs, rhs}, dot_params_of(d, params))[0];
  if (!is_integer(gs.dtype))
    fail<TypeError>("ragged_dot_general requires that group_sizes.dtype is subtype of np.integer.");
  if (mode == RaggedMode::Noncontracting) {  // the group dim is not a free dim of the result
    const int64_t nb = d.dot.lhs_batch.size(), nl = d.dot.lhs_free.size();
    const int64_t at = std::count_if(d.dot.rhs_free.begin(), d.dot.rhs_free.end(),
                                     [&](int64_t a) { return a < d.rhs_group[0]; });
    out.shape.erase(out.shape.begin() + nb + nl + at);
  }
  if (mode == RaggedMode::Contracting) out.shape.insert(out.shape.begin(), groups);
  out.weak_type = false;
  return {out};
}

// C[M, N] += A[M, K] @ B[K, N], row-major with leading dimensions.
template <class T>
void gemm_acc(int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,
              T* c, int64_t ldc) {
  if (M == 0 || N == 0 || K == 0) return;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, lda, b, ldb, 1.0f, c, ldc);
  else if constexpr (std::is_same_v<T, double>)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, a, lda, b, ldb, 1.0, c, ldc);
  else
    for (int64_t i = 0; i < M; ++i)
      for (int64_t p = 0; p < K; ++p) {
        const T av = a[i * lda + p];
        for (int64_t j = 0; j < N; ++j) {
          if constexpr (std::is_same_v<T, bool>) c[i * ldc + j] = c[i * ldc + j] | (av & b[p * ldb + j]);
          else c[i * ldc + j] = static_cast<T>(c[i * ldc + j] + av * b[p * ldb + j]);
        }
      }
}

int64_t prod(const Shape& shape, const IntList& dims) {
  int64_t n = 1;
  for (int64_t a : dims) n *= shape[a];
  return n;
}

IntList cat(std::initializer_list<IntList> parts) {
  IntList out;
  for (const IntList& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// t's dims permuted to `order` and merged into `groups` consecutive blocks.
Tensor pack(const Tensor& t, const IntList& order, const std::vector<IntList>& groups) {
  Shape shape;
  for (const IntList& g : groups) shape.push_back(prod(t.shape(), g));
  return t.transpose(order).contiguous().reshape(shape);
}

// Per prefix index p and group i, the rows [start, end) of the ragged dim
// (JAX's mask start <= row < end, clamped to the dim; groups may overlap when
// sizes are negative, and then add, as in JAX).
std::vector<std::pair<int64_t, int64_t>> group_rows(const Tensor& gs, int64_t prefix, int64_t rows) {
  const Tensor sizes64 = cast(gs, DType::Int64).contiguous();
  const int64_t g = gs.shape().back();
  const int64_t* v = sizes64.data<int64_t>();
  std::vector<std::pair<int64_t, int64_t>> out(prefix * g);
  for (int64_t p = 0; p < prefix; ++p) {
    const int64_t* row = gs.ndim() == 1 ? v : v + p * g;
    int64_t start = 0;
    for (int64_t i = 0; i < g; ++i) {
      const int64_t end = start + row[i];
      out[p * g + i] = {std::clamp<int64_t>(start, 0, rows), std::clamp<int64_t>(end, 0, rows)};
      start = end;
    }
  }
  return out;
}

Tensors ragged_dot_general_kernel(const Tensors& in, const Params& params, const Avals& out) {
  const RaggedDims d = ragged_dims(params, in[0].ndim(), in[1].ndim());
  const RaggedMode mode = ragged_mode(d);
  if (mode == RaggedMode::Batch) {
    return dot_general_kernel({in[0], in[1]}, dot_params_of(d, params), out);
  }
  const DType in_dt = higher_precision(in[0].dtype(), in[1].dtype());
  const DType dt = dot_compute_dtype(in_dt, out[0].dtype);
  const Tensor x = cast(in[0], dt), y = cast(in[1], dt);
  const int64_t r = d.lhs_ragged[0], G = in[2].shape().back();
  const Shape &xs = x.shape(), &ys = y.shape();
  const IntList &lb = d.dot.lhs_batch, &rb = d.dot.rhs_batch, &lc = d.dot.lhs_contract,
                &rc = d.dot.rhs_contract;
  const int64_t B = prod(xs, lb), R = xs[r];
  Tensor result = Tensor::zeros(dt, out[0].shape);
  if (result.size() == 0) return as_tensors(cast(std::move(result), out[0].dtype));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* c = result.data<T>();
    if (mode == RaggedMode::Noncontracting) {
      // lhs [B, X, R, Y, K], rhs [G, B, K, N], result [B, X, R, Y, N].
      const IntList& lf = d.dot.lhs_free;
      const IntList xd(lf.begin(), lf.begin() + index_of(lf, r)), yd(lf.begin() + index_of(lf, r) + 1, lf.end());
      const Tensor a = pack(x, cat({lb, xd, {r}, yd, lc}), {lb, xd, {r}, yd, lc});
      const Tensor b = pack(y, cat({d.rhs_group, rb, rc, d.dot.rhs_free}),
                            {d.rhs_group, rb, rc, d.dot.rhs_free});
      const int64_t X = prod(xs, xd), Y = prod(xs, yd), K = prod(xs, lc), N = prod(ys, d.dot.rhs_free);
      const auto rows = group_rows(in[2], B * X, R);
      for (int64_t p = 0; p < B * X; ++p)
        for (int64_t i = 0; i < G; ++i) {
          const auto [s, e] = rows[p * G + i];
          if (e <= s) continue;
          gemm_acc<T>((e - s) * Y, N, K, a.data<T>() + (p * R + s) * Y * K, K,
                      b.data<T>() + (i * B + p / X) * K * N, N, c + (p * R + s) * Y * N, N);
        }
    } else {
      // lhs [B, M, X, R, Y], rhs [B, X, R, Y, N], result [G, B, M, N].
      const int64_t at = index_of(lc, r);
      const IntList lx(lc.begin(), lc.begin() + at), ly(lc.begin() + at + 1, lc.end());
      const IntList rx(rc.begin(), rc.begin() + at), ry(rc.begin() + at + 1, rc.end());
      const Tensor a = pack(x, cat({lb, d.dot.lhs_free, lx, {r}, ly}), {lb, d.dot.lhs_free, cat({lx, {r}, ly})});
      const Tensor b = pack(y, cat({rb, rx, {rc[at]}, ry, d.dot.rhs_free}),
                            {rb, cat({rx, {rc[at]}, ry}), d.dot.rhs_free});
      const int64_t M = prod(xs, d.dot.lhs_free), X = prod(xs, lx), Y = prod(xs, ly),
                    N = prod(ys, d.dot.rhs_free), KK = X * R * Y;
      const auto rows = group_rows(in[2], B * X, R);
      for (int64_t p = 0; p < B * X; ++p)
        for (int64_t i = 0; i < G; ++i) {
          const auto [s, e] = rows[p * G + i];
          if (e <= s) continue;
          const int64_t bi = p / X, k0 = ((p % X) * R + s) * Y;
          gemm_acc<T>(M, N, (e - s) * Y, a.data<T>() + bi * M * KK + k0, KK,
                      b.data<T>() + (bi * KK + k0) * N, N, c + (i * B + bi) * M * N, N);
        }
    }
  };
  if (is_floating(dt)) dispatch_wide_float(dt, run);
  else dispatch_bitwise(dt, run);
  return {cast(result, out[0].dtype)};
}

// JAX's transpose rule: only the noncontracting mode (what ragged_dot binds)
// has one. d lhs is a noncontracting ragged dot of g with rhs over rhs's free
// dims; d rhs is a contracting ragged dot of lhs with g (per group lhs_i^T g_i).
Cotangents ragged_dot_general_vjp(const VjpArgs& a) {
  const Value &g = *a.ct[0], &x = a.in[0], &y = a.in[1], &gs = a.in[2];
  const Aval xa = aval_of(x), ya = aval_of(y);
  const RaggedDims d = ragged_dims(a.params, xa.ndim(), ya.ndim());
  const RaggedMode mode = ragged_mode(d);
  if (mode != RaggedMode::Noncontracting)
    fail<NotImplementedError>("Unimplemented ", a.wants[0] ? "grad_x_dims" : "grad_y_dims",
                              " for ragged dot general in mode ",
                              mode == RaggedMode::Contracting ? "RAGGED_CONTRACTING" : "RAGGED_BATCH", ".");
  const IntList &xc = d.dot.lhs_contract, &yc = d.dot.rhs_contract, &xb = d.dot.lhs_batch,
                &yb = d.dot.rhs_batch, &x_kept = d.dot.lhs_free, &y_kept = d.dot.rhs_free;
  const int64_t nb = xb.size(), nx = x_kept.size();
  const IntList ans_batch = range_of(0, xb.size()), ans_x = range_of(nb, x_kept.size()),
                ans_y = range_of(nb + nx, y_kept.size());
  auto grad = [&](const Value& lhs, const Value& rhs, IntLists dims, const IntList& unsorted,
                  const Aval& want) {
    Params p = a.params;
    p.set("ragged_dot_dimension_numbers", std::move(dims));
    const Value out = ops::bind1("ragged_dot_general", {lhs, rhs, gs}, p);
    return ops::cast_like(ops::transpose(out, argsort(unsorted)), want);
  };
  auto take = [](const IntList& v, const IntList& order) {
    IntList out;
    for (int64_t i : argsort(order)) out.push_back(v[i]);
    return out;
  };
  Cotangents ct(3);
  if (a.wants[0])
    ct[0] = grad(g, y, {ans_y, y_kept, ans_batch, yb, {nb + index_of(x_kept, d.lhs_ragged[0])}, d.rhs_group},
                 cat({xb, x_kept, take(xc, yc)}), xa);
  if (a.wants[1])
    ct[1] = grad(x, g, {x_kept, ans_x, xb, ans_batch, d.lhs_ragged, {}},
                 cat({d.rhs_group, yb, take(yc, xc), y_kept}), ya);
  return ct;
}

}  // namespace

void register_ragged_dot_primitive() {
  Primitive p;
  p.name = "ragged_dot_general";
  p.operands = exactly(3);
  p.uses_blas = true;
  p.abstract_eval = ragged_dot_general_eval;
  p.kernel = ragged_dot_general_kernel;
  p.vjp = ragged_dot_general_vjp;  // batched: the per-example fallback
  p.print_rule = [](PrintedEquation& e) {
    const auto* d = std::get_if<IntLists>(e.find("ragged_dot_dimension_numbers"));
    if (!d || d->size() != 6) return;
    auto t = [&](size_t i) { return param_value_str((*d)[i]); };
    e.spell("ragged_dot_dimension_numbers",
            "RaggedDotDimensionNumbers(dot_dimension_numbers=((" + t(0) + ", " + t(1) + "), (" + t(2) + ", " + t(3) +
                ")), lhs_ragged_dimensions=" + t(4) + ", rhs_group_dimensions=" + t(5) + ")");
  };
  register_primitive(std::move(p));
}

}  // namespace meshsim
