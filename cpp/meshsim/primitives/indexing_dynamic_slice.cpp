// dynamic_slice(operand, *start_indices; slice_sizes), a zero-copy window,
// and dynamic_update_slice(operand, update, *start_indices), each with its
// VJP, batching (a gather or scatter when the starts are batched), sharding
// rule and kernel.
#include <algorithm>

#include "meshsim/ir/donated_operands.h"
#include "meshsim/ir/kernel_results.h"
#include "meshsim/ir/ops.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/indexing_common.h"

namespace meshsim::indexing {
namespace {

Cotangents dynamic_slice_vjp(const VjpArgs& a) {
  const Values starts(a.in.begin() + 1, a.in.end());
  Cotangents ct(a.in.size());
  ct[0] = ops::dynamic_update_slice(ops::zeros_like(a.in[0]), *a.ct[0], starts);
  return ct;
}

Cotangents dynamic_update_slice_vjp(const VjpArgs& a) {
  const Values starts(a.in.begin() + 2, a.in.end());
  const Value& g = *a.ct[0];
  Cotangents ct(a.in.size());
  if (a.wants[0]) ct[0] = ops::dynamic_update_slice(g, ops::zeros_like(a.in[1]), starts);
  if (a.wants[1]) ct[1] = ops::dynamic_slice(g, starts, aval_of(a.in[1]).shape);
  return ct;
}

// Batched start indices: the window of each example as indices of every
// element, [batch, *window] per operand dimension, started where
// dynamic_slice starts it (clamped to fit).
Values window_indices(const BatchArgs& a, size_t first, const Shape& window) {
  const Shape& operand = aval_of(a.in[0]).shape;
  Shape shape{a.size};
  shape.insert(shape.end(), window.begin(), window.end());
  Values idx;
  for (size_t k = 0; k < window.size(); ++k) {
    const int64_t n = operand[k + (a.dims[0] != kNotBatched && static_cast<int64_t>(k) >= a.dims[0] ? 1 : 0)];
    const int64_t d = a.dims[first + k];
    Value s = ops::convert(a.in[first + k], DType::Int32);
    auto c = [&](double v) { return ops::full(aval_of(s).shape, DType::Int32, v); };
    s = ops::max(ops::min(s, c(static_cast<double>(n - window[k]))), c(0));
    s = ops::broadcast_in_dim(s, shape, d == kNotBatched ? IntList{} : IntList{0});
    idx.push_back(ops::add(s, ops::iota(DType::Int32, shape, static_cast<int64_t>(k) + 1)));
  }
  return idx;
}

std::vector<Spec> dynamic_update_slice_rule(const Avals& in, const Params&, const Avals&) {
  const Aval &x = in[0], &u = in[1];
  const Mesh& mesh = x.mesh ? *x.mesh : *u.mesh;
  const bool same_mesh = x.mesh && u.mesh && same_abstract_mesh(*x.mesh, *u.mesh);
  const bool both_replicated = is_replicated(spec_of(x)) && is_replicated(spec_of(u));
  if (!(same_mesh || both_replicated) || spec_of(x) != spec_of(u))
    fail<ShardingTypeError>("dynamic_update_slice operand sharding must be equal to update sharding, "
                            "got operand sharding ", str_with_axis_types(x, x.mesh ? *x.mesh : mesh),
                            " and update sharding ", str_with_axis_types(u, u.mesh ? *u.mesh : mesh), ".");
  return {spec_of(x)};
}

// Start indices of a dynamic slice, each clamped so the window of `sizes` fits
// (XLA's rule: a negative start is 0; meshsim.lax.dynamic_slice counts
// negative starts from the end before it binds, with equations, as JAX does).
int64_t window_offset(const Tensor& operand, const Tensor* starts, const Shape& sizes) {
  int64_t off = 0;
  for (int64_t d = 0; d < operand.ndim(); ++d) {
    int64_t s = dispatch_integer(starts[d].dtype(), [&](auto tag) {
      return static_cast<int64_t>(*starts[d].data<decltype(tag)>());
    });
    const int64_t n = operand.shape()[d];
    off += std::clamp<int64_t>(s, 0, n - sizes[d]) * operand.strides()[d];
  }
  return off;
}

void check_starts(const std::string& prim, const Aval& operand, const Avals& starts) {
  if (static_cast<int64_t>(starts.size()) != operand.ndim())
    fail<TypeError>(prim, " start_indices must have length equal to the number of dimensions of the "
                    "operand, got indices of length ", starts.size(), " for operand of shape ",
                    shape_str(operand.shape));
  for (const Aval& s : starts)
    if (!s.shape.empty() || !is_integer(s.dtype))
      fail<TypeError>(prim, " start indices must be integer scalars, got ", s.str());
}

// The window must fit in the operand, checked as JAX's shape rules check it
// (a dynamic_slice's sizes are checked by the static slice's rule, so its
// errors say "slice").
void check_window(const std::string& prim, const Shape& window, const Shape& operand) {
  const bool slicing = prim == "dynamic_slice";
  for (size_t d = 0; d < operand.size(); ++d)
    if (window[d] > operand[d]) {
      if (slicing)
        fail<TypeError>("slice slice_sizes must be less than or equal to operand shape, got slice_sizes ",
                        shape_str(window), " for operand shape ", shape_str(operand), ".");
      fail<TypeError>(prim, " update shape must be smaller than operand shape, got update shape ",
                      shape_str(window), " for operand shape ", shape_str(operand), ".");
    }
  for (int64_t size : window)
    if (size < 0)
      fail<TypeError>("slice slice_sizes must be greater than or equal to zero, got slice_sizes of ",
                      shape_str(window), ".");
}

// dynamic_slice(operand, *start_indices; slice_sizes): a zero-copy window.
void dynamic_slice() {
  Primitive p;
  p.name = "dynamic_slice";
  p.operands = at_least(1);  // the operand, then its start indices
  p.fuses_operands = true;  // XLA fuses the operand it slices
  p.factors = same_size_factors;
  p.sharding_rule = [](const Avals& in, const Params&, const Avals& out) {
    return varying_shape_rule("dynamic_slice", in[0], out[0].shape);
  };
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    if (!sharded_dims_whole(in[0], out[0].shape)) return std::nullopt;
    return local_shape_plan("slice_sizes")(in, p, out);
  };
  // Unbatched starts: one more dimension, sliced whole. Batched ones: a gather.
  p.batch = [](const BatchArgs& a) {
    const Shape& sizes = a.params.get<IntList>("slice_sizes");
    if (!any_batched(a.dims, 1)) {
      Values starts{ops::full({}, a.in.size() > 1 ? aval_of(a.in[1]).dtype : DType::Int32, 0.0)};
      starts.insert(starts.end(), a.in.begin() + 1, a.in.end());
      Shape batched_sizes{a.size};
      batched_sizes.insert(batched_sizes.end(), sizes.begin(), sizes.end());
      return Batched{{ops::dynamic_slice(batch_at(a.in[0], a.dims[0], 0, a.size), starts, batched_sizes)}, {0}};
    }
    Values idx = window_indices(a, 1, sizes);
    IntList axes;
    for (size_t k = 0; k < sizes.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    Value x = a.in[0];
    if (a.dims[0] != kNotBatched) {
      x = batch_at(x, a.dims[0], 0, a.size);
      axes = shift_axes(axes);
      axes.insert(axes.begin(), 0);
      idx.insert(idx.begin(), ops::iota(DType::Int32, aval_of(idx[0]).shape, 0));
    }
    return Batched{{ops::gather(x, idx, axes, 0, "clip")}, {0}};
  };
  p.vjp = dynamic_slice_vjp;
  // Only the window is read (and the starts), as XLA's cost analysis counts it.
  p.cost = [](const Avals& in, const Params&, const Avals& out) {
    Avals read{out[0]};
    read.insert(read.end(), in.begin() + 1, in.end());
    return memory_cost(read, out);
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Shape& sizes = params.get<IntList>("slice_sizes");
    const Aval& x = in[0];
    check_starts("dynamic_slice", x, Avals(in.begin() + 1, in.end()));
    if (static_cast<int64_t>(sizes.size()) != x.ndim())
      fail<TypeError>("dynamic_slice slice_sizes must have the same length as the operand's shape ",
                      shape_str(x.shape), ", got ", shape_str(sizes));
    check_window("dynamic_slice", sizes, x.shape);
    return Avals{like(x, sizes, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    const Tensor& x = in[0];
    return as_tensors(x.view(out[0].shape, x.strides(), window_offset(x, &in[1], out[0].shape)));
  };
  register_primitive(std::move(p));
}

// dynamic_update_slice(operand, update, *start_indices).
void dynamic_update_slice() {
  Primitive p;
  p.name = "dynamic_update_slice";
  p.operands = at_least(2);  // the operand and the update, then the start indices
  p.factors = same_size_factors;
  // The update is written where it lands: on the assembled value (no local plan).
  p.sharding_rule = dynamic_update_slice_rule;
  // Unbatched starts: one more dimension, updated whole. Batched: a scatter.
  p.batch = [](const BatchArgs& a) {
    const Value x = batch_at(a.in[0], a.dims[0], 0, a.size), upd = batch_at(a.in[1], a.dims[1], 0, a.size);
    if (!any_batched(a.dims, 2)) {
      Values starts{ops::full({}, a.in.size() > 2 ? aval_of(a.in[2]).dtype : DType::Int32, 0.0)};
      starts.insert(starts.end(), a.in.begin() + 2, a.in.end());
      return Batched{{ops::dynamic_update_slice(x, upd, starts)}, {0}};
    }
    const Shape& per_example = aval_of(a.in[1]).shape;
    Shape window = per_example;
    if (a.dims[1] != kNotBatched) window.erase(window.begin() + a.dims[1]);
    // Indices computed against the batched operand (batch at 0, so shift by one).
    const BatchDims dims_at_front = [&] {
      BatchDims d = a.dims;
      d[0] = 0;
      return d;
    }();
    const Values in_front = [&] {
      Values v = a.in;
      v[0] = x;
      return v;
    }();
    Values idx = window_indices(BatchArgs{a.prim, in_front, dims_at_front, a.params, a.size}, 2, window);
    IntList axes{0};
    for (size_t k = 0; k < window.size(); ++k) axes.push_back(static_cast<int64_t>(k) + 1);
    idx.insert(idx.begin(), ops::iota(DType::Int32, aval_of(idx[0]).shape, 0));
    return Batched{{ops::scatter("scatter", x, upd, idx, axes, 0, "clip")}, {0}};
  };
  p.vjp = dynamic_update_slice_vjp;
  // In place: the update (and the starts) read, the update's window written.
  p.cost = [](const Avals& in, const Params&, const Avals&) {
    return memory_cost(Avals(in.begin() + 1, in.end()), Avals{in[1]});
  };
  p.abstract_eval = [](const Avals& in, const Params&) {
    const Aval &x = in[0], &upd = in[1];
    check_starts("dynamic_update_slice", x, Avals(in.begin() + 2, in.end()));
    if (upd.dtype != x.dtype)
      fail<TypeError>("lax.dynamic_update_slice requires arguments to have the same dtypes, got ",
                      dtype_name(x.dtype), ", ", dtype_name(upd.dtype), ".");
    if (upd.ndim() != x.ndim())
      fail<TypeError>("dynamic_update_slice update must have the operand's rank, got update shape ",
                      shape_str(upd.shape), " for operand shape ", shape_str(x.shape));
    check_window("dynamic_update_slice", upd.shape, x.shape);
    return Avals{like(x, x.shape, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals&) {
    const Tensor& upd = in[1];
    Tensor res = updatable_copy(in, 0);  // the operand itself when it is read for the last time
    Tensor window = res.view(upd.shape(), res.strides(), window_offset(res, &in[2], upd.shape()));
    dispatch_any_dtype(res.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* dst = window.data<T>();
      const T* src = upd.data<T>();
      for_each_offsets<2>(upd.shape(), {&window.strides(), &upd.strides()},
                          [&](const std::array<int64_t, 2>& o) { dst[o[0]] = src[o[1]]; });
    });
    return as_tensors(std::move(res));
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_dynamic_slices() {
  dynamic_slice();
  dynamic_update_slice();
}

}  // namespace meshsim::indexing
