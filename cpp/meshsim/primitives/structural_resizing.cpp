// The structural primitives that change a dimension's size: slice (a
// zero-copy view), concatenate and pad (one fresh buffer each, a memcpy per
// contiguous run), and stack and unstack, which join operands along a new
// dimension (one fresh buffer) and take them apart again (views). The others
// are in structural.cpp.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "meshsim/ir/ops.h"
#include "meshsim/ir/primitive.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/families.h"
#include "meshsim/primitives/structural_resizing.h"
#include "meshsim/runtime/timeline.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/halo.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {

std::vector<Spec> concatenate_rule(const Avals& in, const Params&, const Avals&) {
  const Aval* first = nullptr;
  for (const Aval& a : in) {
    if (!a.mesh) continue;
    if (!first) first = &a;
    else if (!same_abstract_mesh(*a.mesh, *first->mesh) || spec_of(a) != spec_of(*first))
      fail<ShardingTypeError>("All operands should have the same sharding. Got shardings ", sharding_list(in));
  }
  return {spec_of(*first)};
}



// Fills contiguous `out` with the value of the 0-d tensor `scalar`.
void fill(Tensor& out, const Tensor& scalar) {
  dispatch_word(itemsize(out.dtype()), [&](auto word) {
    using W = decltype(word);
    W value;
    std::memcpy(&value, scalar.raw(), sizeof(W));
    std::fill_n(out.data<W>(), out.size(), value);
  });
}

// lax.slice(x, start_indices, limit_indices, strides): a strided view.
void slice() {
  Primitive p;
  p.name = "slice";
  p.operands = exactly(1);
  p.moves_elements = true;
  p.fused_into_readers = true;  // XLA recomputes it inside the readers that fuse it
  p.ur_rule = keep_operand_ur();  // a part of each partial sum is a partial sum of the part
  p.factors = same_size_factors;
  p.unmapped_dims_keep_sharding = true;  // a sliced dim keeps its sharding
  p.sharding_rule = [](const Avals& in, const Params&, const Avals& out) {
    return varying_shape_rule("slicing", in[0], out[0].shape);
  };
  // A sliced dim split over the same axes in operand and result runs on
  // blocks when each device's result block lies within its own operand block
  // (XLA's partitioner slices each block at its own offset then, moving
  // nothing): param `block_slices` lists per device its id and its local
  // start and limit indices. Otherwise, for one such dim sliced with stride
  // 1, each device receives the part of its result block its neighbours hold
  // (a halo exchange, sharding/halo.h; params `halo_window` and
  // `halo_permutes` for run_local), as XLA's partitioner reads a slice as a
  // window, and slices nothing more there. A result whose size the axes do
  // not divide (`x[1:]` of 16 over 8) takes blocks of it rounded up, as XLA
  // slices unevenly, gathered whole after (params `uneven_blocks` and
  // `whole_windows`, runtime/sharded.cpp) where its layout leaves the dim whole.
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    const Spec s = spec_of(in[0]);
    const Spec r = out[0].mesh ? spec_of(out[0]) : Spec(s.size());
    const IntList& start = p.get<IntList>("start_indices");
    IntList limit = p.get<IntList>("limit_indices");
    const IntList strides = p.get_or<IntList>("strides", IntList(start.size(), 1));
    Sharding sh;
    sh.mesh = in[0].mesh;
    sh.spec = s;
    const Shape local = sh.local_shape(in[0].shape);
    IntList moved;  // sliced dims kept split: each block slices at its own offset
    int64_t halo_dim = -1;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d].empty()) continue;
      if (start[d] == 0 && limit[d] == in[0].shape[d] && strides[d] == 1) {
        limit[d] = local[d];
        continue;
      }
      const int64_t n = entry_size(*in[0].mesh, s[d]), m = out[0].shape[d];
      if (r[d].empty() && m % n != 0 && strides[d] == 1 && m > 0 && halo_dim < 0) {
        halo_dim = static_cast<int64_t>(d);  // over uneven blocks, gathered after
        continue;
      }
      if (r[d] != s[d] || m % n != 0) return std::nullopt;
      bool within = true;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t first = start[d] + i * (m / n) * strides[d];
        const int64_t last = first + (m / n - 1) * strides[d];
        within = within && !(m / n > 0 && (first < i * local[d] || last >= (i + 1) * local[d]));
      }
      if (within) {
        moved.push_back(static_cast<int64_t>(d));
      } else {
        if (strides[d] != 1 || halo_dim >= 0 || m == 0) return std::nullopt;
        halo_dim = static_cast<int64_t>(d);
      }
    }
    LocalPlan plan = *as_is_plan(nullptr)(in, p, out);
    plan.params.set("limit_indices", limit);
    if (halo_dim >= 0) {
      const int64_t n = entry_size(*in[0].mesh, s[halo_dim]), m = out[0].shape[halo_dim];
      const bool uneven = m % n != 0;
      const int64_t window = (m + n - 1) / n;
      const auto permutes = halo_permutes(in[0].shape[halo_dim], n, local[halo_dim], window, -start[halo_dim]);
      if (!moved.empty() || !permutes) return std::nullopt;
      IntList lo = start;
      lo[halo_dim] = 0;  // the window received is the result block
      limit[halo_dim] = window;
      plan.params.set("start_indices", lo);
      plan.params.set("limit_indices", limit);
      plan.params.set("halo_window", IntList{halo_dim, -start[halo_dim], window});
      plan.params.set("halo_permutes", flattened(*permutes));
      if (uneven) {
        plan.params.set("uneven_blocks", halo_dim);
        plan.params.set("whole_windows", true);
        plan.out_specs[0] = r;
      }
      return plan;
    }
    if (moved.empty()) return plan;
    IntList blocks;
    for (int64_t pos = 0; pos < sh.mesh->size(); ++pos) {
      const std::vector<int64_t> index = sh.block_index(pos, static_cast<int64_t>(s.size()));
      IntList lo = start, hi = limit;
      for (int64_t d : moved) {
        const int64_t m = out[0].shape[d] / entry_size(*in[0].mesh, s[d]);
        lo[d] = start[d] + index[d] * m * strides[d] - index[d] * local[d];
        hi[d] = m == 0 ? lo[d] : lo[d] + (m - 1) * strides[d] + 1;
      }
      blocks.push_back(sh.mesh->device_ids[pos]);
      blocks.insert(blocks.end(), lo.begin(), lo.end());
      blocks.insert(blocks.end(), hi.begin(), hi.end());
    }
    plan.params.set("block_slices", blocks);
    return plan;
  };
  p.batch = [](const BatchArgs& a) {
    const IntList& start = a.params.get<IntList>("start_indices");
    IntList lo{0}, hi{a.size}, step{1};
    const IntList strides = a.params.get_or<IntList>("strides", IntList(start.size(), 1));
    for (size_t d = 0; d < start.size(); ++d) {
      lo.push_back(start[d]);
      hi.push_back(a.params.get<IntList>("limit_indices")[d]);
      step.push_back(strides[d]);
    }
    Params params = a.params;
    params.set("start_indices", lo);
    params.set("limit_indices", hi);
    if (!a.params.is_none("strides")) params.set("strides", step);  // None stays None, as JAX's rule keeps it
    return bind_at_front(a, params);
  };
  // The cotangent padded back into place, with zeros between strided elements.
  p.vjp = [](const VjpArgs& a) {
    const Shape& in = aval_of(a.in[0]).shape;
    const Shape& out = aval_of(a.out[0]).shape;
    const IntList& start = a.params.get<IntList>("start_indices");
    const IntList strides = a.params.get_or<IntList>("strides", IntList(start.size(), 1));
    IntLists config;
    for (size_t d = 0; d < in.size(); ++d) {
      const int64_t m = out[d], covered = m == 0 ? 0 : m + (m - 1) * (strides[d] - 1);
      config.push_back({m == 0 ? 0 : start[d], in[d] - (m == 0 ? 0 : start[d]) - covered, strides[d] - 1});
    }
    const Value& g = *a.ct[0];
    return Cotangents{ops::pad(g, ops::full({}, aval_of(g).dtype, 0.0), config)};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const IntList& start = params.get<IntList>("start_indices");
    const IntList& limit = params.get<IntList>("limit_indices");
    const Aval& x = in[0];
    if (static_cast<int64_t>(start.size()) != x.ndim())
      fail<TypeError>("slice start_indices must have length equal to the number of dimensions of "
                      "the operand, got indices ", param_value_str(start), " for operand shape ",
                      shape_str(x.shape), ".");
    if (limit.size() != start.size())
      fail<TypeError>("slice limit_indices must have the same length as start_indices, got "
                      "start_indices ", param_value_str(start), " and limit_indices ",
                      param_value_str(limit), ".");
    IntList strides = params.get_or<IntList>("strides", IntList(start.size(), 1));
    if (strides.size() != start.size())
      fail<TypeError>("slice strides must have length equal to the number of dimensions of the "
                      "operand, got strides ", param_value_str(strides), " for operand shape ",
                      shape_str(x.shape), ".");
    Shape s;
    for (size_t i = 0; i < start.size(); ++i) {
      if (limit[i] > x.shape[i])
        fail<TypeError>("slice limit_indices must be less than or equal to operand shape, got "
                        "limit_indices ", param_value_str(limit), " for operand shape ",
                        shape_str(x.shape), ".");
      if (start[i] < 0)
        fail<TypeError>("slice start_indices must be greater than or equal to zero, got "
                        "start_indices of ", param_value_str(start), ".");
      if (limit[i] < start[i])
        fail<TypeError>("slice limit_indices must be greater than or equal to start_indices, got "
                        "start_indices ", param_value_str(start), " and limit_indices ",
                        param_value_str(limit), ".");
      if (strides[i] <= 0)
        fail<TypeError>("slice strides must be positive, got ", param_value_str(strides));
      s.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
    }
    return Avals{like(x, s, x.dtype, x.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals&) {
    const IntList& start = params.get<IntList>("start_indices");
    IntList strides = params.get_or<IntList>("strides", IntList(start.size(), 1));
    if (params.has("block_slices")) {  // this device's block, at its own offsets (local_plan)
      const IntList& blocks = params.get<IntList>("block_slices");
      const size_t ndim = start.size();
      const int64_t device = timeline::current_device();
      for (size_t k = 0; k + 2 * ndim < blocks.size(); k += 2 * ndim + 1)
        if (blocks[k] == device)
          return as_tensors(in[0].slice(IntList(blocks.begin() + k + 1, blocks.begin() + k + 1 + ndim),
                                        IntList(blocks.begin() + k + 1 + ndim, blocks.begin() + k + 1 + 2 * ndim),
                                        strides));
      fail<std::runtime_error>("a partitioned slice runs on device ", device, ", which holds no block");
    }
    return as_tensors(in[0].slice(start, params.get<IntList>("limit_indices"), strides));
  };
  register_primitive(std::move(p));
}

void check_same_dtypes(const char* prim, const Avals& in) {
  for (const Aval& a : in)
    if (a.dtype != in[0].dtype) {
      std::string names;
      for (size_t i = 0; i < in.size(); ++i) names += (i ? ", " : "") + std::string(dtype_name(in[i].dtype));
      fail<TypeError>(prim, " requires arguments to have the same dtypes, got ", names, ".");
    }
}

std::string shapes_str(const Avals& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + shape_str(in[i].shape);
  return s;
}

// lax.concatenate(operands, dimension): one output buffer, each operand
// copied into its band along `dimension`.
void concatenate() {
  Primitive p;
  p.name = "concatenate";
  p.operands = at_least(0);  // abstract_eval refuses none with JAX's text
  p.factors = same_size_factors;
  // The concatenated dim keeps its sharding, computed by moving its axes to another dim.
  p.unmapped_dims_keep_sharding = true;
  p.retiles_through_other_dim = true;
  p.fuses_operands = true;  // XLA fuses what it concatenates
  p.sharding_rule = concatenate_rule;
  p.local_plan = as_is_plan([](const Avals& in, const Params& p, const Avals&) {
    const int64_t d = p.get<int64_t>("dimension");
    for (const Aval& a : in)
      if (!spec_of(a)[d].empty()) return false;
    return true;
  });
  p.batch = [](const BatchArgs& a) {
    Params params = a.params;
    params.set("dimension", a.params.get<int64_t>("dimension") + 1);
    return bind_at_front(a, params);
  };
  p.vjp = [](const VjpArgs& a) {
    const int64_t dim = a.params.get<int64_t>("dimension");
    Cotangents ct;
    int64_t begin = 0;
    for (size_t i = 0; i < a.in.size(); ++i) {
      const int64_t end = begin + aval_of(a.in[i]).shape[dim];
      ct.push_back(a.wants[i] ? Cotangent(ops::slice_in_dim(*a.ct[0], begin, end, dim)) : std::nullopt);
      begin = end;
    }
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const int64_t dim = params.get<int64_t>("dimension");
    if (in.empty()) fail<TypeError>("concatenate expects at least one operand, got 0.");
    for (const Aval& a : in)
      if (a.ndim() != in[0].ndim())
        fail<TypeError>("Cannot concatenate arrays with different numbers of dimensions: got ",
                        shapes_str(in), ".");
    if (dim < 0 || dim >= in[0].ndim())
      fail<TypeError>("concatenate dimension out of bounds: dimension ", dim, " for shapes ",
                      shapes_str(in), ".");
    check_same_dtypes("lax.concatenate", in);
    Shape s = in[0].shape;
    s[dim] = 0;
    bool weak = true;
    for (const Aval& a : in) {
      for (int64_t d = 0; d < a.ndim(); ++d)
        if (d != dim && a.shape[d] != s[d])
          fail<TypeError>("Cannot concatenate arrays with shapes that differ in dimensions other "
                          "than the one being concatenated: concatenating along dimension ", dim,
                          " for shapes ", shapes_str(in), ".");
      s[dim] += a.shape[dim];
      weak = weak && a.weak_type;
    }
    return Avals{like(in[0], s, in[0].dtype, weak)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const int64_t dim = params.get<int64_t>("dimension");
    Tensor result = Tensor::empty(out[0].dtype, out[0].shape);
    IntList begin(result.ndim(), 0), end = result.shape(), step(result.ndim(), 1);
    for (const Tensor& x : in) {
      end[dim] = begin[dim] + x.shape()[dim];
      copy_into(x, result.slice(begin, end, step));
      begin[dim] = end[dim];
    }
    return as_tensors(std::move(result));
  };
  register_primitive(std::move(p));
}

// The position of param `axis` checked against `rank` (the result's for
// stack, the operand's for unstack): lax canonicalises it before binding.
int64_t checked_axis(const char* prim, const Params& params, int64_t rank) {
  const int64_t axis = params.get<int64_t>("axis");
  if (axis < 0 || axis >= rank)
    fail<ValueError>(prim, " axis ", axis, " is out of bounds for array of dimension ", rank);
  return axis;
}

// lax.stack(operands, axis): operands of one shape as the slices of a new
// dimension `axis`; one output buffer, each operand copied into its slice.
void stack() {
  Primitive p;
  p.name = "stack";
  p.operands = at_least(0);  // abstract_eval refuses none with JAX's text
  p.fuses_operands = true;   // XLA fuses what it concatenates
  // Operand dims keep their factor in the result; the new dim is computed whole.
  p.factors = [](const Avals& in, const Params& params, const Avals& out) -> std::optional<FactorMap> {
    FactorMap m = blank_factors(in, out);
    const int64_t axis = params.get<int64_t>("axis");
    for (int64_t d = 0; d < in[0].ndim(); ++d) {
      for (auto& operand : m.in) operand[d] = m.num_factors;
      m.out[0][d < axis ? d : d + 1] = m.num_factors++;
    }
    return m;
  };
  // As JAX: operands laid out alike (or not at all), the new dim unsplit.
  p.sharding_rule = [](const Avals& in, const Params& params, const Avals& out) {
    Spec s = concatenate_rule(in, params, out)[0];
    s.insert(s.begin() + params.get<int64_t>("axis"), AxisNames{});
    return std::vector<Spec>{s};
  };
  // Each device stacks its blocks, the operands laid out as the result without its new dim.
  p.local_plan = [](const Avals& in, const Params& params, const Avals& out) -> std::optional<LocalPlan> {
    const int64_t axis = params.get<int64_t>("axis");
    const Spec r = spec_of(out[0]);
    if (!r[axis].empty()) return std::nullopt;
    LocalPlan plan;
    plan.in_specs.assign(in.size(), drop_dims(r, {axis}));
    plan.params = params;
    plan.out_specs = {r};
    return plan;
  };
  // JAX's rule: operands batched alike stay where they are (the new dim goes
  // before or after their batch dim); otherwise every batch moves to the front.
  p.batch = [](const BatchArgs& a) {
    const int64_t axis = a.params.get<int64_t>("axis"), first = a.dims[0];
    Params params = a.params;
    if (first != kNotBatched && std::all_of(a.dims.begin(), a.dims.end(), [&](int64_t d) { return d == first; })) {
      params.set("axis", axis <= first ? axis : axis + 1);
      return Batched{{ops::bind1("stack", a.in, params)}, {axis <= first ? first + 1 : first}};
    }
    Values operands;
    for (size_t i = 0; i < a.in.size(); ++i) {
      if (a.dims[i] != kNotBatched) {
        operands.push_back(batch_at(a.in[i], a.dims[i], 0, a.size));
        continue;
      }
      Shape shape = aval_of(a.in[i]).shape;
      IntList dims(shape.size());
      std::iota(dims.begin(), dims.end(), 1);
      shape.insert(shape.begin(), a.size);
      operands.push_back(ops::broadcast_in_dim(a.in[i], shape, dims));  // lax.broadcast's dims
    }
    params.set("axis", axis + 1);
    return Batched{{ops::bind1("stack", operands, params)}, {0}};
  };
  // Linear: the cotangent unstacked.
  p.vjp = [](const VjpArgs& a) {
    Cotangents ct(a.in.size());
    if (!a.ct[0]) return ct;
    const Values parts = meshsim::bind(primitive("unstack"), {*a.ct[0]}, {{"axis", a.params.get<int64_t>("axis")}});
    for (size_t i = 0; i < a.in.size(); ++i)
      if (a.wants[i]) ct[i] = parts[i];
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    if (in.empty()) fail<ValueError>("stack expects at least one operand, got 0.");
    for (const Aval& a : in)
      if (a.ndim() != in[0].ndim())
        fail<ValueError>("Cannot stack arrays with different numbers of dimensions: got ", shapes_str(in), ".");
    for (const Aval& a : in)
      if (a.shape != in[0].shape)
        fail<ValueError>("All input arrays must have the same shape. Got ", shapes_str(in), ".");
    check_same_dtypes("lax.stack", in);
    const int64_t axis = checked_axis("stack", params, in[0].ndim() + 1);
    bool weak = true;
    for (const Aval& a : in) weak = weak && a.weak_type;
    Shape s = in[0].shape;
    s.insert(s.begin() + axis, static_cast<int64_t>(in.size()));
    return Avals{like(in[0], s, in[0].dtype, weak)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const int64_t axis = params.get<int64_t>("axis");
    Tensor result = Tensor::empty(out[0].dtype, out[0].shape);
    Strides strides = result.strides();
    const int64_t step = strides[axis];
    strides.erase(strides.begin() + axis);
    for (size_t i = 0; i < in.size(); ++i)
      copy_into(in[i], result.view(in[i].shape(), strides, static_cast<int64_t>(i) * step));
    return as_tensors(std::move(result));
  };
  register_primitive(std::move(p));
}

// lax.unstack(x, axis): the slices of `x` along `axis`, one result each,
// every one a view of the operand.
void unstack() {
  Primitive p;
  p.name = "unstack";
  p.operands = exactly(1);
  p.fused_into_readers = true;  // XLA recomputes each slice inside the readers that fuse it
  p.ur_rule = keep_operand_ur();  // linear: the parts of a partial sum are partial sums
  p.factors = [](const Avals& in, const Params& params, const Avals& out) -> std::optional<FactorMap> {
    return keep_dims_factors(in, out, {}, {params.get<int64_t>("axis")}, false);
  };
  p.sharding_rule = [](const Avals& in, const Params& params, const Avals& out) {
    const int64_t axis = params.get<int64_t>("axis");
    const Spec s = spec_of(in[0]);
    if (!s[axis].empty())
      fail<ShardingTypeError>("unstack operand cannot be sharded on the unstacking axis ", axis,
                              ". Got operand type=", in[0].str_short(true));
    return std::vector<Spec>(out.size(), drop_dims(s, {axis}));
  };
  p.local_plan = as_is_plan([](const Avals& in, const Params& params, const Avals&) {
    return spec_of(in[0])[params.get<int64_t>("axis")].empty();
  });
  // JAX's rule: the unstacked dim and the batch dim keep their order.
  p.batch = [](const BatchArgs& a) {
    const int64_t axis = a.params.get<int64_t>("axis"), dim = a.dims[0];
    Params params = a.params;
    params.set("axis", axis < dim ? axis : axis + 1);
    Values out = meshsim::bind(primitive("unstack"), a.in, params);
    BatchDims dims(out.size(), axis < dim ? dim - 1 : dim);
    return Batched{std::move(out), std::move(dims)};
  };
  // Linear: the cotangents stacked, symbolic zeros made real (none at all: none).
  p.vjp = [](const VjpArgs& a) {
    if (std::none_of(a.ct.begin(), a.ct.end(), [](const Cotangent& c) { return c.has_value(); }))
      return Cotangents{std::nullopt};
    Values parts;
    for (size_t i = 0; i < a.ct.size(); ++i) parts.push_back(ops::instantiate(a.ct[i], aval_of(a.out[i])));
    return Cotangents{ops::bind1("stack", parts, {{"axis", a.params.get<int64_t>("axis")}})};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Aval& x = in[0];
    if (x.ndim() == 0)
      fail<ValueError>("unstack requires arrays with rank > 0, however a scalar array of shape () was passed.");
    const int64_t axis = checked_axis("unstack", params, x.ndim());
    Shape s = x.shape;
    s.erase(s.begin() + axis);
    return Avals(static_cast<size_t>(x.shape[axis]), like(x, s, x.dtype, x.weak_type));
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const int64_t axis = params.get<int64_t>("axis");
    const Tensor& x = in[0];
    Strides strides = x.strides();
    const int64_t step = strides[axis];
    strides.erase(strides.begin() + axis);
    Tensors parts;
    for (size_t i = 0; i < out.size(); ++i)
      parts.push_back(x.view(out[i].shape, strides, static_cast<int64_t>(i) * step));
    return parts;
  };
  register_primitive(std::move(p));
}

// A pad of a split dim, on blocks as XLA's partitioner runs it: the result
// keeps the operand's layout and each device pads the part of the operand its
// block reads, its own elements and the halos its neighbours send
// (sharding/halo.h). Params for run_local: `halo_window` (the dim, the low
// padding, the result's block size along it) and `halo_permutes`
// (sharding/halo.h `flattened`); for the kernel, `block_padding`:
// per device, its id and its block's low and high padding along the dim.
// A padded size the dim's axes do not divide keeps the split too, as in XLA:
// blocks of the size rounded up, the last ones partly or wholly padding, all
// gathered where the result is laid out whole along the dim (param
// `uneven_blocks`: the dim; runtime/sharded.cpp gathers them and cuts the
// padding off).
std::optional<LocalPlan> halo_pad_plan(const Avals& in, const Params& p, const Avals& out) {
  const Spec s = spec_of(in[0]);
  if (!in[0].mesh || !out[0].mesh) return std::nullopt;
  const Spec r = spec_of(out[0]);
  const IntLists& config = p.get<IntLists>("padding_config");
  int64_t dim = -1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d].empty() || in[0].shape[d] == out[0].shape[d]) continue;
    if (dim >= 0) return std::nullopt;  // XLA exchanges one dim's halos after another's: not modelled
    dim = static_cast<int64_t>(d);
  }
  if (dim < 0 || config[dim][2] != 0) return std::nullopt;
  const int64_t n = entry_size(*in[0].mesh, s[dim]), size = in[0].shape[dim], padded = out[0].shape[dim];
  if (size % n != 0) return std::nullopt;
  const bool uneven = padded % n != 0;
  // The result is laid out as the operand, but for an uneven dim: whole.
  Spec expected = s;
  if (uneven) expected[dim].clear();
  if (r != expected) return std::nullopt;
  const int64_t low = config[dim][0], window = (padded + n - 1) / n;
  const std::optional<std::vector<HaloPermute>> permutes = halo_permutes(size, n, size / n, window, low);
  if (!permutes) return std::nullopt;
  LocalPlan plan = *as_is_plan(nullptr)(in, p, out);
  plan.params.set("halo_window", IntList{dim, low, window});
  plan.params.set("halo_permutes", flattened(*permutes));
  if (uneven) {
    plan.params.set("uneven_blocks", dim);
    plan.out_specs[0] = r;
  }
  Sharding sh;
  sh.mesh = in[0].mesh;
  sh.spec = s;
  IntList blocks;
  for (int64_t pos = 0; pos < sh.mesh->size(); ++pos) {
    const int64_t start = sh.block_index(pos, in[0].ndim())[dim] * window - low;
    const int64_t before = std::clamp<int64_t>(-start, 0, window);
    const int64_t kept = std::clamp<int64_t>(std::min(size, start + window) - std::max<int64_t>(start, 0), 0, window);
    blocks.insert(blocks.end(), {sh.mesh->device_ids[pos], before, window - before - kept});
  }
  plan.params.set("block_padding", blocks);
  return plan;
}

// lax.pad(x, padding_value, padding_config): per dimension (low, high,
// interior); negative low/high crop. The output is filled with the padding
// value, then the operand elements that land inside are copied over it.
void pad() {
  Primitive p;
  p.name = "pad";
  p.operands = exactly(2);
  p.fused_into_readers = true;  // XLA recomputes it inside the readers that fuse it
  p.fuses_operands = true;
  p.factors = same_size_factors;
  p.unmapped_dims_keep_sharding = true;  // a padded dim keeps its sharding
  p.sharding_rule = [](const Avals& in, const Params&, const Avals& out) {
    return varying_shape_rule("padding", in[0], out[0].shape);
  };
  p.local_plan = [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    if (sharded_dims_whole(in[0], out[0].shape)) return as_is_plan(nullptr)(in, p, out);
    return halo_pad_plan(in, p, out);
  };
  p.batch = [](const BatchArgs& a) {
    if (a.dims[1] != kNotBatched) return batch_per_example(a);  // a batched padding value: rare
    IntLists config{{0, 0, 0}};
    for (const IntList& c : a.params.get<IntLists>("padding_config")) config.push_back(c);
    Params params = a.params;
    params.set("padding_config", config);
    return bind_at_front(a, params, {true, false});
  };
  // As JAX: the operand's cotangent is the unpadded, de-interleaved
  // cotangent; the padding value's is everything else.
  p.vjp = [](const VjpArgs& a) {
    const Value& g = *a.ct[0];
    const Aval& x = aval_of(a.in[0]);
    Value operand_ct = g;
    if (x.ndim() > 0) {
      const IntLists& config = a.params.get<IntLists>("padding_config");
      IntLists unpad;
      IntList zeros(x.ndim(), 0), steps;
      for (const IntList& c : config) {
        unpad.push_back({-c[0], -c[1], 0});
        steps.push_back(c[2] + 1);
      }
      const Value unpadded = ops::pad(g, ops::full({}, aval_of(g).dtype, 0.0), unpad);
      operand_ct = ops::slice(unpadded, zeros, aval_of(unpadded).shape, steps);
    }
    Cotangents ct(2);
    if (a.wants[0]) ct[0] = operand_ct;
    if (a.wants[1]) {
      IntList all(x.ndim());
      for (int64_t d = 0; d < x.ndim(); ++d) all[d] = d;
      ct[1] = ops::sub(ops::reduce_sum(g, all), ops::reduce_sum(operand_ct, all));
    }
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Aval &x = in[0], &value = in[1];
    if (x.dtype != value.dtype)
      fail<TypeError>("pad operand and padding_value must be same dtype: got ", dtype_name(x.dtype),
                      " and ", dtype_name(value.dtype), ".");
    if (value.ndim() != 0)
      fail<ValueError>("padding_value must be a scalar; got np.shape(padding_value)=",
                       shape_str(value.shape));
    // A 0-d operand's empty config arrives as an empty list of ints.
    const IntLists config = x.ndim() ? params.get<IntLists>("padding_config") : IntLists{};
    const std::string config_str = x.ndim() ? param_value_str(config) : "()";
    if (static_cast<int64_t>(config.size()) != x.ndim())
      fail<ValueError>("length of padding_config must equal the number of axes of operand, got "
                       "padding_config ", config_str, " for operand shape ", shape_str(x.shape));
    Shape s;
    for (size_t d = 0; d < config.size(); ++d) {
      if (config[d].size() != 3)
        fail<ValueError>("padding_config must hold (low, high, interior) triples, got ", config_str);
      const int64_t lo = config[d][0], hi = config[d][1], interior = config[d][2];
      if (interior < 0)
        fail<ValueError>("interior padding in padding_config must be nonnegative, got "
                         "padding_config ", config_str);
      const int64_t n = x.shape[d];
      s.push_back(lo + hi + (n == 0 ? 0 : n + (n - 1) * interior));
    }
    for (int64_t d : s)
      if (d < 0)
        fail<ValueError>("Dimension size after padding is not at least 0, got result shape ",
                         shape_str(s), ", for padding_config ", config_str, " and operand shape ",
                         shape_str(x.shape));
    return Avals{like(x, s, x.dtype, x.weak_type && value.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    const Tensor& x = in[0];
    Tensor result = Tensor::empty(out[0].dtype, out[0].shape);
    fill(result, in[1]);
    if (x.ndim() == 0) {
      copy_into(x, result);
      return as_tensors(std::move(result));
    }
    IntLists config = params.get<IntLists>("padding_config");
    if (params.has("block_padding")) {  // this device's block of a split dim (halo_pad_plan)
      const IntList& blocks = params.get<IntList>("block_padding");
      const int64_t device = timeline::current_device();
      size_t k = 0;
      while (k + 2 < blocks.size() && blocks[k] != device) k += 3;
      if (k + 2 >= blocks.size())
        fail<std::runtime_error>("a partitioned pad runs on device ", device, ", which holds no block");
      config[params.get<IntList>("halo_window")[0]] = {blocks[k + 1], blocks[k + 2], 0};
    }
    // Per dimension, the operand indices [first, last) whose positions
    // lo + i * (interior + 1) fall inside the output.
    IntList first, last, step(x.ndim(), 1), dst_strides;
    Shape kept;
    int64_t dst_offset = 0;
    for (int64_t d = 0; d < x.ndim(); ++d) {
      const int64_t lo = config[d][0], gap = config[d][2] + 1, out_n = out[0].shape[d];
      const int64_t i0 = lo >= 0 ? 0 : (-lo + gap - 1) / gap;
      const int64_t i1 = std::clamp<int64_t>(out_n - lo <= 0 ? 0 : (out_n - lo + gap - 1) / gap,
                                             i0, std::max(i0, x.shape()[d]));
      first.push_back(i0);
      last.push_back(i1);
      kept.push_back(i1 - i0);
      dst_strides.push_back(result.strides()[d] * gap);
      dst_offset += (lo + i0 * gap) * result.strides()[d];
    }
    if (num_elements(kept) > 0)
      copy_into(x.slice(first, last, step), result.view(kept, dst_strides, dst_offset));
    return as_tensors(std::move(result));
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_resizing_primitives() {
  slice();
  concatenate();
  stack();
  unstack();
  pad();
}

}  // namespace meshsim
