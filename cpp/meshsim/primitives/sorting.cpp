// Sorting primitives: sort (multi-operand, lexicographic keys), top_k and
// searchsorted.
//
// Order (as JAX): NaNs sort after everything and -0.0 == 0.0 for sort and
// searchsorted; top_k uses the total order (NaN largest, -0.0 < 0.0) and
// breaks ties by the lower index.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <numeric>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/core/strided.h"
#include "meshsim/primitives/families.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {

// Narrow floats order as their float32 values, four-bit integers as their values.
template <class T>
bool sort_less(T a, T b) {
  if constexpr (is_small_float_v<T>) {
    return sort_less(float(a), float(b));
  } else if constexpr (is_int4_v<T>) {
    return a.value() < b.value();
  } else {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return false;
      if (std::isnan(b)) return true;
    }
    return a < b;
  }
}

// Complex numbers order lexicographically on (real, imag), each part as a
// float key (JAX's sort comparator).
template <class F>
bool sort_less(std::complex<F> a, std::complex<F> b) {
  if (sort_less(a.real(), b.real())) return true;
  if (sort_less(b.real(), a.real())) return false;
  return sort_less(a.imag(), b.imag());
}

// The dtypes sort and searchsorted order: every real one, the four-bit
// integers and complex.
template <class F>
decltype(auto) dispatch_sortable(DType dt, F&& f) {
  if (is_complex(dt)) return dispatch_complex(dt, std::forward<F>(f));
  if (dt == DType::Int4) return f(int4{});
  if (dt == DType::UInt4) return f(uint4{});
  return dispatch_dtype(dt, std::forward<F>(f));
}

template <class T>
bool total_less(T a, T b) {
  if constexpr (is_small_float_v<T>) return total_less(float(a), float(b));
  if constexpr (std::is_floating_point_v<T>)
    if (a == b) return std::signbit(a) && !std::signbit(b);
  return sort_less(a, b);
}

// Offsets of the first element of every lane along `dim`, in row-major order
// of the other dims.
std::vector<int64_t> lane_starts(const Shape& shape, const Strides& strides, int64_t dim) {
  Shape s = shape;
  Strides st = strides;
  s.erase(s.begin() + dim);
  st.erase(st.begin() + dim);
  std::vector<int64_t> starts;
  for_each_offset(s, st, [&](int64_t o) { starts.push_back(o); });
  return starts;
}


// Stable lexicographic order of one lane: a stable sort per key, least
// significant first.
void sort_lane_perm(const Tensors& keys, int64_t dim, const std::vector<int64_t>& starts, size_t lane,
                    std::vector<int64_t>& perm) {
  const int64_t n = static_cast<int64_t>(perm.size());
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t k = keys.size(); k-- > 0;) {
    const Tensor& key = keys[k];
    dispatch_sortable(key.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* p = key.data<T>() + starts[lane];
      const int64_t st = key.strides()[dim];
      std::vector<T> vals(n);
      for (int64_t i = 0; i < n; ++i) vals[i] = p[i * st];
      std::stable_sort(perm.begin(), perm.end(),
                       [&](int64_t a, int64_t b) { return sort_less(vals[a], vals[b]); });
    });
  }
}

// Permutes every operand's lanes by the order of the first num_keys operands.
Tensors sort_by_keys(const Tensors& in, int64_t dim, int64_t num_keys, const Avals& out) {
  const int64_t n = in[0].shape()[dim];
  Tensors res;
  std::vector<std::vector<int64_t>> in_starts, out_starts;
  for (size_t j = 0; j < in.size(); ++j) {
    res.push_back(Tensor::empty(out[j].dtype, out[j].shape));
    in_starts.push_back(lane_starts(in[j].shape(), in[j].strides(), dim));
    out_starts.push_back(lane_starts(res[j].shape(), res[j].strides(), dim));
  }
  // Keys read through contiguous copies so that their lanes share offsets.
  Tensors keys;
  for (int64_t k = 0; k < num_keys; ++k) keys.push_back(in[k].contiguous());
  const auto key_starts = lane_starts(keys[0].shape(), keys[0].strides(), dim);
  std::vector<int64_t> perm(n);
  for (size_t lane = 0; lane < key_starts.size(); ++lane) {
    sort_lane_perm(keys, dim, key_starts, lane, perm);
    for (size_t j = 0; j < in.size(); ++j) {
      dispatch_word(itemsize(in[j].dtype()), [&](auto tag) {
        using U = decltype(tag);
        const U* src = in[j].data<U>() + in_starts[j][lane];
        U* dst = res[j].data<U>() + out_starts[j][lane];
        const int64_t ss = in[j].strides()[dim], ds = res[j].strides()[dim];
        for (int64_t i = 0; i < n; ++i) dst[i * ds] = src[perm[i] * ss];
      });
    }
  }
  return res;
}

// One operand sorted by itself: sort the values directly.
Tensor sort_values(const Tensor& x, int64_t dim) {
  Tensor res = x.copy();
  const int64_t n = x.shape()[dim], st = res.strides()[dim];
  dispatch_sortable(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> lane(n);
    for (int64_t start : lane_starts(res.shape(), res.strides(), dim)) {
      T* p = res.data<T>() + start;
      for (int64_t i = 0; i < n; ++i) lane[i] = p[i * st];
      std::stable_sort(lane.begin(), lane.end(), [](T a, T b) { return sort_less(a, b); });
      for (int64_t i = 0; i < n; ++i) p[i * st] = lane[i];
    }
  });
  return res;
}

// ---- VJP rules -------------------------------------------------------------
// Sorting permutes along one axis: each cotangent is scattered back through
// the permutation (given in full coordinates, for the scatter to read).

Value unpermute(const Value& g, const Value& perm, int64_t axis, const Shape& operand_shape) {
  const Shape& shape = aval_of(g).shape;
  Values coords;
  IntList axes;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    coords.push_back(d == axis ? ops::convert(perm, DType::Int32) : ops::iota(DType::Int32, shape, d));
    axes.push_back(d);
  }
  Aval zeros = aval_of(g);
  zeros.shape = operand_shape;
  return ops::scatter("scatter_add", ops::zeros(zeros), g, coords, axes, 0, "clip");
}

// The permutation is found again by sorting an iota along with the keys.
Cotangents sort_vjp(const VjpArgs& a) {
  const int64_t dim = a.params.get<int64_t>("dimension"), num_keys = a.params.get<int64_t>("num_keys");
  const Shape& shape = aval_of(a.in[0]).shape;
  Values keys(a.in.begin(), a.in.begin() + num_keys);
  keys.push_back(ops::iota(DType::Int32, shape, dim));
  const Value perm = ops::sort(keys, dim, num_keys).back();
  Cotangents ct(a.in.size());
  for (size_t i = 0; i < a.in.size(); ++i)
    if (a.wants[i] && a.ct[i]) ct[i] = unpermute(*a.ct[i], perm, dim, shape);
  return ct;
}

Cotangents top_k_vjp(const VjpArgs& a) {
  if (!a.ct[0]) return Cotangents(1);
  return {unpermute(*a.ct[0], a.out[1], a.params.get<int64_t>("axis"), aval_of(a.in[0]).shape)};
}

// ---- sharding in types: rules and local plans (sharding/rules.h) ----------------

std::vector<Spec> top_k_rule(const Avals& in, const Params& p, const Avals& out) {
  const int64_t axis = p.get<int64_t>("axis");
  if (!spec_of(in[0])[axis].empty())
    fail<ShardingTypeError>("The input should be unsharded over the axis along which to compute the "
                            "top_k values. Got input type=", in[0].str_short(), " and axis=", axis);
  return std::vector<Spec>(out.size(), spec_of(in[0]));
}

// sort(*operands; dimension, is_stable, num_keys): always stable here.
void sort() {
  Primitive p;
  p.name = "sort";
  p.operands = at_least(0);  // abstract_eval refuses none with its own text
  p.sharding_rule = unsharded_dim_rule("dimension", true);
  p.local_plan = as_is_plan(nullptr);
  p.factors = whole_dims_factors("dimension", true);
  p.batch = [](const BatchArgs& a) {
    Params params = a.params;
    params.set("dimension", a.params.get<int64_t>("dimension") + 1);
    return bind_at_front(a, params);
  };
  p.vjp = sort_vjp;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    if (in.empty()) fail<TypeError>("sort requires at least one operand");
    for (const Aval& a : in)
      if (a.shape != in[0].shape)
        fail<TypeError>("sort operands must have the same shape, got ", shape_str(in[0].shape), " and ",
                        shape_str(a.shape));
    if (in[0].ndim() == 0) fail<TypeError>("sort requires operands of rank at least 1");
    const int64_t dim = params.get<int64_t>("dimension");
    if (dim < 0 || dim >= in[0].ndim())
      fail<ValueError>("sort dimension ", dim, " is out of bounds for operands of rank ", in[0].ndim());
    const int64_t num_keys = params.get<int64_t>("num_keys");
    if (num_keys < 1 || num_keys > static_cast<int64_t>(in.size()))
      fail<ValueError>("sort num_keys must be in [1, ", in.size(), "], got ", num_keys);
    Avals out;
    for (const Aval& a : in) out.push_back(like(a, a.shape, a.dtype, a.weak_type));
    return out;
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const int64_t dim = params.get<int64_t>("dimension");
    if (in.size() == 1) return as_tensors(sort_values(in[0], dim));
    return sort_by_keys(in, dim, params.get<int64_t>("num_keys"), out);
  };
  register_primitive(std::move(p));
}

// top_k(operand; k, axis): the k largest along `axis`, and their int32 indices.
void top_k() {
  Primitive p;
  p.name = "top_k";
  p.operands = exactly(1);
  // The k largest along a whole (unsharded) dimension: each device's block.
  p.sharding_rule = top_k_rule;
  p.local_plan = as_is_plan(nullptr);
  p.factors = whole_dims_factors("axis", true);
  p.batch = [](const BatchArgs& a) {
    Params params = a.params;
    params.set("axis", a.params.get<int64_t>("axis") + 1);
    return bind_at_front(a, params);
  };
  p.vjp = top_k_vjp;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Aval& x = in[0];
    const int64_t k = params.get<int64_t>("k");
    if (is_complex(x.dtype)) fail<ValueError>("top_k is not compatible with complex inputs.");
    if (x.ndim() == 0) fail<TypeError>("top_k operand must have >= 1 dimension, got ", x.str());
    const int64_t axis = params.get<int64_t>("axis");
    if (axis < 0 || axis >= x.ndim())
      fail<ValueError>("top_k axis ", axis, " is out of bounds for operand of rank ", x.ndim());
    if (k < 0) fail<ValueError>("k argument to top_k must be nonnegative, got ", k);
    if (x.shape[axis] < k)
      fail<TypeError>("k argument to top_k must be no larger than size of operand along axis, got k=",
                      k, " for operand of shape ", shape_str(x.shape));
    if (is_bool(x.dtype)) fail<TypeError>("top_k does not accept dtype bool");
    Shape s = x.shape;
    s[axis] = k;
    return Avals{like(x, s, x.dtype, x.weak_type), like(x, s, DType::Int32)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const Tensor& x = in[0];
    const int64_t axis = params.get<int64_t>("axis"), k = params.get<int64_t>("k");
    const int64_t n = x.shape()[axis];
    Tensor vals = Tensor::empty(out[0].dtype, out[0].shape), idx = Tensor::empty(DType::Int32, out[1].shape);
    const auto in_starts = lane_starts(x.shape(), x.strides(), axis);
    const auto out_starts = lane_starts(vals.shape(), vals.strides(), axis);
    const int64_t xs = x.strides()[axis], os = vals.strides()[axis];
    std::vector<int32_t> perm(n);
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      for (size_t lane = 0; lane < in_starts.size(); ++lane) {
        const T* src = x.data<T>() + in_starts[lane];
        std::iota(perm.begin(), perm.end(), 0);
        std::partial_sort(perm.begin(), perm.begin() + k, perm.end(), [&](int32_t a, int32_t b) {
          const T va = src[a * xs], vb = src[b * xs];
          return total_less(vb, va) || (!total_less(va, vb) && a < b);
        });
        T* v = vals.data<T>() + out_starts[lane];
        int32_t* ix = idx.data<int32_t>() + out_starts[lane];
        for (int64_t i = 0; i < k; ++i) {
          v[i * os] = src[perm[i] * xs];
          ix[i * os] = perm[i];
        }
      }
    });
    return as_tensors(std::move(vals), std::move(idx));
  };
  register_primitive(std::move(p));
}

// searchsorted(sorted, query; side): int32 insertion points of query's
// elements into the 1-D sorted array, "left" or "right" of equal ones.
void searchsorted() {
  Primitive p;
  p.name = "searchsorted";
  p.operands = exactly(2);
  // Queries of any shape: a batch of them against one sorted array is one call.
  p.batch = [](const BatchArgs& a) {
    if (a.dims[0] != kNotBatched) return batch_per_example(a);
    return Batched{meshsim::bind(a.prim, a.in, a.params), {a.dims[1]}};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Aval &a = in[0], &v = in[1];
    if (a.ndim() != 1) fail<ValueError>("searchsorted: a must be 1-dimensional, got ", a.str());
    if (a.dtype != v.dtype)
      fail<TypeError>("searchsorted: a and v must have one dtype, got ", dtype_name(a.dtype), " and ",
                      dtype_name(v.dtype));
    const std::string& side = params.get<std::string>("side");
    if (side != "left" && side != "right")
      fail<ValueError>("searchsorted: side must be 'left' or 'right', got '", side, "'");
    return Avals{like(v, v.shape, DType::Int32)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const Tensor a = in[0].contiguous();
    const Tensor& v = in[1];
    const bool left = params.get<std::string>("side") == "left";
    Tensor res = Tensor::empty(DType::Int32, out[0].shape);
    dispatch_sortable(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *first = a.data<T>(), *last = first + a.size(), *q = v.data<T>();
      int32_t* o = res.data<int32_t>();
      auto less = [](T x, T y) { return sort_less(x, y); };
      int64_t k = 0;
      for_each_offset(v.shape(), v.strides(), [&](int64_t off) {
        const T* pos = left ? std::lower_bound(first, last, q[off], less)
                            : std::upper_bound(first, last, q[off], less);
        o[k++] = static_cast<int32_t>(pos - first);
      });
    });
    return as_tensors(std::move(res));
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_sorting_primitives() {
  sort();
  top_k();
  searchsorted();
}

}  // namespace meshsim
