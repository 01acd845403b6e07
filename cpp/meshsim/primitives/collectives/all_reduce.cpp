// All-reduces (psum, pmax, pmin, unreduced_psum) and the type casts around
// them (pvary, and the free casts among varying, unreduced and reduced types),
// and axis_index: collectives whose result has the operand's shape.
#include <algorithm>
#include <map>
#include <vector>

#include "meshsim/core/runtime_error.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/ir/axis_env.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/primitives/collectives/common.h"
#include "meshsim/primitives/collectives/cross_device_reduce.h"
#include "meshsim/primitives/families.h"

namespace meshsim {
namespace {

// An all-reduce: each group's members get one shared tensor holding the
// elementwise reduction of their blocks, combined in member order as XLA's CPU
// runtime combines them (cross_device_reduce.h), so the result is the same
// whatever the thread count.

// Whether `t` fills exactly size() consecutive elements from raw() in some
// order of its dimensions (contiguous, or a transpose of contiguous).
bool dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dimensions longer than 1
  for (int64_t d = 0; d < t.ndim(); ++d)
    if (t.shape()[d] != 1) dims.push_back({t.strides()[d], t.shape()[d]});
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

bool same_layout(const Tensor& a, const Tensor& b) {
  for (int64_t d = 0; d < a.ndim(); ++d)
    if (a.shape()[d] != 1 && a.strides()[d] != b.strides()[d]) return false;
  return true;
}

Tensor reduce_blocks(const std::vector<const Tensor*>& blocks, Reduce op, const MeshContext& ctx) {
  // Blocks laid out alike in dense memory (e.g. all transposed views) reduce
  // over their memory as it is, into a result with their layout: no copies.
  const Tensor& first = *blocks[0];
  bool flat = dense(first);
  for (size_t i = 1; i < blocks.size() && flat; ++i) flat = same_layout(first, *blocks[i]);
  Tensor out;
  std::vector<Tensor> srcs;
  if (flat) {
    out = Tensor::empty(first.dtype(), {first.size()}).view(first.shape(), first.strides(), 0);
    for (const Tensor* b : blocks) srcs.push_back(*b);
  } else {
    out = Tensor::empty(first.dtype(), first.shape());
    for (const Tensor* b : blocks) srcs.push_back(b->contiguous());
  }
  // XLA has no cross-device form of JAX's lexicographic complex max/min.
  if (is_complex(out.dtype()) && op != Reduce::Sum)
    fail<JaxRuntimeError>("UNIMPLEMENTED: Unsupported reduction computation: ", op == Reduce::Max ? "max" : "min",
                          " of ", dtype_name(out.dtype()), " values across devices (pmax/pmin, or a reduction "
                          "over a sharded dimension)");
  auto dispatch = [&](auto&& f) {  // bool: any/all of sharded reductions (pmax/pmin)
    if (out.dtype() == DType::Bool) f(bool{});
    else dispatch_number(out.dtype(), f);
  };
  dispatch([&](auto tag) {
    using T = decltype(tag);
    const int64_t n = out.size();
    std::vector<const T*> members;
    for (const Tensor& s : srcs) members.push_back(s.data<T>());
    auto run = [&](int64_t lo, int64_t hi) {
      std::vector<const T*> from(members);
      for (const T*& p : from) p += lo;
      reduce_across_members<T>(op, from.data(), static_cast<int64_t>(from.size()), out.data<T>() + lo, hi - lo);
    };
    constexpr int64_t kChunk = 1 << 16;  // elements per task: big blocks reduce in parallel
    if (n <= kChunk) return run(0, n);
    ctx.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
      const int64_t lo = c * kChunk;
      run(lo, std::min(n, lo + kChunk));
    });
  });
  return out;
}

std::vector<Tensors> all_reduce(const MeshContext& ctx, const std::vector<Tensors>& in,
                                const AxisNames& axes, Reduce op) {
  std::vector<Tensors> out(in.size(), Tensors(in[0].size()));
  const auto groups = ctx.groups(axes);
  for (size_t k = 0; k < in[0].size(); ++k) {
    // Groups holding the same buffers (a value replicated over other axes) reduce once.
    std::map<std::vector<const void*>, int64_t> seen;
    std::vector<int64_t> job_of(groups.size()), jobs;
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<const void*> key;
      for (int64_t pos : groups[g]) key.push_back(in[pos][k].raw());
      auto [it, fresh] = seen.emplace(std::move(key), static_cast<int64_t>(jobs.size()));
      if (fresh) jobs.push_back(static_cast<int64_t>(g));
      job_of[g] = it->second;
    }
    std::vector<Tensor> reduced(jobs.size());
    ctx.parallel_for(static_cast<int64_t>(jobs.size()), [&](int64_t j) {
      std::vector<const Tensor*> blocks;
      for (int64_t pos : groups[jobs[j]]) blocks.push_back(&in[pos][k]);
      reduced[j] = reduce_blocks(blocks, op, ctx);
    });
    for (size_t g = 0; g < groups.size(); ++g)
      for (int64_t pos : groups[g]) out[pos][k] = reduced[job_of[g]];  // one buffer per group
  }
  return out;
}

// The rule every variant->invariant reduction shares: the axes must be bound,
// and (with VMA checking) the operand must vary over all of them.
Avals reduction_eval(const std::string& name, const Avals& in, const Params& p) {
  const AxisNames& axes = axes_param(p);
  bound_axis_size(axes, name);
  if (vma_checking())
    for (const Aval& a : in)
      for (const auto& n : axes)
        if (!contains(a.vma, n))
          fail<ValueError>(name, " is a variant->invariant collective. This means that the axis "
                           "names mentioned in `axes` passed to `", name, "` must be present in "
                           "`jax.typeof(inp).mat.varying`. Got axes=", names_str(axes),
                           " and jax.typeof(inp).mat.varying=", frozenset_str(a.vma));
  return in;
}

// JAX's check on collectives over plain values: no operand may be unreduced or reduced
// over the collective's axes; pending reductions over other axes pass through.
UrRule off_pending_axes(const std::string& name) {
  return [name](const Avals& in, const Params& params) -> UrAxes {
    const AxisNames& axes = axes_param(params);
    std::string axis_set = "{";
    for (size_t i = 0; i < axes.size(); ++i) axis_set += (i ? ", '" : "'") + axes[i] + "'";
    axis_set += "}";
    for (const Aval& a : in)
      for (const auto& [kind, pending] : {std::pair{"unreduced", &a.unreduced}, std::pair{"reduced", &a.reduced}})
        if (std::any_of(axes.begin(), axes.end(), [&](const auto& x) { return contains(*pending, x); }))
          fail<ValueError>(name, " cannot accept args which are ", kind, ". Got ", a.str_short(true),
                           " and axes=", axis_set);
    return {in.at(0).unreduced, in.at(0).reduced};
  };
}

Primitive all_reduce_primitive(const std::string& name, Reduce op) {
  Primitive p;
  p.name = name;
  p.operands = at_least(1);
  p.ur_rule = off_pending_axes(name == "psum_invariant" ? "psum" : name);
  p.kind = Kind::Collective;
  p.abstract_eval = [name](const Avals& in, const Params& params) {
    Avals out = reduction_eval(name, in, params);
    for (Aval& a : out) a.weak_type = in[0].weak_type;
    return out;
  };
  p.vma_rule = [](const Avals& in, const Params& params) {
    return vma_checking() ? vma_minus(in[0].vma, axes_param(params)) : AxisNames{};
  };
  p.mesh_kernel = [op](const MeshContext& ctx, const std::vector<Tensors>& in, const Params& params,
                       const Avals&) { return all_reduce(ctx, in, axes_param(params), op); };
  p.batch = batch_in_place;
  return p;
}

Value transpose_psum(const Value& ct, const Params& p) {
  return vary_over(ct, axes_param(p));  // invariant -> varying: free
}

Value transpose_pvary(const Value& ct, const Params& p) {
  const AxisNames& axes = axes_param(p);
  return ops::bind1("psum_invariant", {vary_over(ct, axes)}, {{"axes", axes}});
}

Value transpose_plain_psum(const Value& ct, const Params& p) {
  return ops::bind1("psum", {ct}, {{"axes", axes_param(p)}});
}

// A ring all-reduce (reduce-scatter then all-gather): each device sends and
// receives 2(n-1)/n of each operand in 2(n-1) steps.
Primitive& with_ring_all_reduce(Primitive& p) {
  with_ring_comm(
      p, [](const Params& params) { return axes_param(params); }, false,
      [](int64_t in, int64_t, int64_t n) { return 2 * in / n * (n - 1); },
      [](int64_t n) { return 2 * (n - 1); });
  return lowers_to(p, "all-reduce");
}

// A free cast among manual types (JAX's vary_unreduced_cast, reduced_vary_cast,
// preduced): each device keeps its block; the axes move from one state to
// another, and an operand not in the `from` state over them is refused with
// JAX's texts.
enum class State { Invariant, Varying, Unreduced, Reduced };

AxisNames* axes_in(Aval& a, State s) {
  return s == State::Varying ? &a.vma : s == State::Unreduced ? &a.unreduced : s == State::Reduced ? &a.reduced : nullptr;
}

struct StateCast {
  const char* name;
  const char* describe;  // "Varying->Unreduced", as JAX's messages say it
  State from, to;
};

Aval cast_state(const StateCast& c, Aval x, const AxisNames& axes) {
  if (AxisNames* from = axes_in(x, c.from)) *from = vma_minus(*from, axes);
  if (AxisNames* to = axes_in(x, c.to)) *to = vma_plus(*to, axes);
  return x;
}

Primitive state_cast(const StateCast& c, std::function<Value(const Value&, const Params&)> transpose) {
  Primitive p;
  p.name = c.name;
  p.operands = exactly(1);
  p.abstract_eval = [c](const Avals& in, const Params& params) {
    const AxisNames& axes = axes_param(params);
    bound_axis_size(axes, c.name);
    Aval x = in.at(0);
    if (const AxisNames* from = axes_in(x, c.from)) {
      const char* state = c.from == State::Varying ? "varying" : c.from == State::Unreduced ? "unreduced" : "reduced";
      if (from->empty())
        fail<ValueError>(c.name, " only accepts inputs that are ", state, ". Got ", x.str_short(true));
      if (std::none_of(axes.begin(), axes.end(), [&](const auto& a) { return contains(*from, a); }))
        fail<ValueError>(c.name, " is a ", c.describe, " collective. This means that the axis names mentioned "
                         "in `axes` passed to `", c.name, "` must be present in `jax.typeof(x).mat.", state,
                         "`. Got axes=", names_str(axes), " and jax.typeof(x).mat.", state, "=",
                         frozenset_str(*from));
    } else {
      for (const auto& a : axes)
        if (contains(x.vma, a))
          fail<ValueError>(c.name, " is a ", c.describe, " collective. This means that the axis names "
                           "mentioned in `axes` passed to `", c.name, "` must not be present in "
                           "`jax.typeof(inp).mat.varying`. Got axes=", names_str(axes),
                           " and jax.typeof(inp).mat.varying=", frozenset_str(x.vma));
    }
    return in;
  };
  p.vma_rule = [c](const Avals& in, const Params& params) { return cast_state(c, in[0], axes_param(params)).vma; };
  p.ur_rule = [c](const Avals& in, const Params& params) -> UrAxes {
    const Aval out = cast_state(c, in[0], axes_param(params));
    return {out.unreduced, out.reduced};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals&) { return in; };
  p.batch = batch_in_place;
  return with_linear_vjp(p, std::move(transpose));
}

// psum of a value unreduced over the axes: the pending sum performed (an
// all-reduce); the result is invariant over them.
Primitive unreduced_psum_primitive() {
  Primitive p = all_reduce_primitive("unreduced_psum", Reduce::Sum);
  p.operands = exactly(1);
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const AxisNames& axes = axes_param(params);
    bound_axis_size(axes, "psum");
    const Aval& x = in.at(0);
    if (x.unreduced.empty())
      fail<ValueError>("unreduced_psum only accepts inputs that are unreduced. Got ", x.str_short(true));
    if (std::none_of(axes.begin(), axes.end(), [&](const auto& a) { return contains(x.unreduced, a); }))
      fail<ValueError>("unreduced_psum is a Unreduced -> Invariant collective. This means that the axes=",
                       names_str(axes), " passed to `unreduced_psum` must be present in "
                       "jax.typeof(x).mat.unreduced=", frozenset_str(x.unreduced));
    for (const auto& a : axes)
      if (contains(x.vma, a))
        fail<ValueError>("unreduced_psum's input cannot be varying across the  axis_name provided. Got x=",
                         x.str_short(true), " and axes=", names_str(axes));
    return in;
  };
  p.vma_rule = [](const Avals& in, const Params&) { return in[0].vma; };
  p.ur_rule = [](const Avals& in, const Params& params) -> UrAxes {
    return {vma_minus(in[0].unreduced, axes_param(params)), in[0].reduced};
  };
  return p;
}

}  // namespace

void register_all_reduce_primitives() {
  // psum over manual axes: psum_invariant with VMA checking (varying ->
  // invariant), plain psum without, as JAX names them.
  Primitive psum_invariant = all_reduce_primitive("psum_invariant", Reduce::Sum);
  register_primitive(with_ring_all_reduce(with_linear_vjp(psum_invariant, transpose_psum)));
  // psum, pmax and pmin also combine the partial results of sharded
  // reductions and dots outside shard_map (XLA's all-reduces there).
  Primitive psum = all_reduce_primitive("psum", Reduce::Sum);
  psum.partials_reduction = "sum";
  register_primitive(with_ring_all_reduce(with_linear_vjp(psum, transpose_plain_psum)));
  Primitive pmax = all_reduce_primitive("pmax", Reduce::Max);
  pmax.partials_reduction = "max";
  register_primitive(with_ring_all_reduce(pmax));
  Primitive pmin = all_reduce_primitive("pmin", Reduce::Min);
  pmin.partials_reduction = "min";
  register_primitive(with_ring_all_reduce(pmin));
  // pvary: invariant -> varying. Only the type changes; at run time its operands
  // pass through (the devices along the axes already hold equal values).
  Primitive pvary;
  pvary.name = "pvary";
  pvary.operands = at_least(0);
  pvary.fused_into_readers = true;
  pvary.result_is_operand_view = true;
  pvary.abstract_eval = [](const Avals& in, const Params& p) {
    const AxisNames& axes = axes_param(p);
    bound_axis_size(axes, "pvary");
    for (const Aval& a : in)
      for (const auto& n : axes)
        if (contains(a.vma, n))
          fail<ValueError>("pvary is a invariant->variant collective. This means that the axis "
                           "names mentioned in `axes` passed to `pvary` must not be present in "
                           "`jax.typeof(inp).mat.varying`. Got axes=", names_str(axes),
                           " and jax.typeof(inp)=", a.str_short());
    return in;
  };
  pvary.vma_rule = [](const Avals& in, const Params& p) { return vma_plus(in[0].vma, axes_param(p)); };
  pvary.ur_rule = off_pending_axes("pvary");
  pvary.passes_through = true;
  pvary.batch = batch_in_place;
  register_primitive(with_linear_vjp(pvary, transpose_pvary));

  // The free casts among manual types, each the transpose of another, and
  // unreduced_psum, whose transpose is preduced (as JAX pairs them).
  auto bind_as = [](const char* name) {
    return [name](const Value& ct, const Params& p) { return ops::bind1(name, {ct}, {{"axes", axes_param(p)}}); };
  };
  register_primitive(state_cast({"vary_unreduced_cast_p", "Varying->Unreduced", State::Varying, State::Unreduced},
                                bind_as("reduced_vary_cast_p")));
  register_primitive(state_cast({"reduced_vary_cast_p", "Reduced->Varying", State::Reduced, State::Varying},
                                bind_as("vary_unreduced_cast_p")));
  Primitive preduced = state_cast({"preduced", "Invariant->Reduced", State::Invariant, State::Reduced},
                                   bind_as("unreduced_psum"));
  register_primitive(std::move(preduced));
  Primitive unreduced_psum = unreduced_psum_primitive();
  register_primitive(with_ring_all_reduce(with_linear_vjp(unreduced_psum, bind_as("preduced"))));

  // axis_index: this device's coordinate along one manual axis (int32, varying over it).
  Primitive axis_index;
  axis_index.name = "axis_index";
  axis_index.operands = exactly(0);
  axis_index.kind = Kind::Collective;
  // Each device reads its own coordinate: nothing moves.
  axis_index.comm = [](const MeshContext& ctx, const std::vector<Tensors>&, const Params& p, const Avals&) {
    return symmetric_traffic(ctx, {p.get<std::string>("axis_name")}, {}, 0, 0);
  };
  axis_index.comm_bytes = [](const Avals&, const Avals&, int64_t) { return int64_t{0}; };
  axis_index.comm_steps = [](int64_t) { return int64_t{0}; };
  axis_index.abstract_eval = [](const Avals&, const Params& p) {
    bound_axis_size({p.get<std::string>("axis_name")}, "axis_index");
    Aval a;
    a.dtype = DType::Int32;
    return Avals{a};
  };
  axis_index.vma_rule = [](const Avals&, const Params& p) {
    return vma_checking() ? AxisNames{p.get<std::string>("axis_name")} : AxisNames{};
  };
  axis_index.mesh_kernel = [](const MeshContext& ctx, const std::vector<Tensors>&, const Params& p,
                              const Avals&) {
    const AxisNames axes{p.get<std::string>("axis_name")};
    std::vector<Tensors> out(ctx.num_devices());
    for (int64_t pos = 0; pos < ctx.num_devices(); ++pos)
      out[pos].push_back(Tensor::scalar<int32_t>(static_cast<int32_t>(ctx.axis_index(pos, axes))));
    return out;
  };
  register_primitive(std::move(axis_index));
}

namespace {
const bool kRegistered = add_primitive_family(register_all_reduce_primitives);  // families.h
}  // namespace

}  // namespace meshsim
