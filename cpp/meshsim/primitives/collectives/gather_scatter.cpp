// all_gather, all_gather_invariant and reduce_scatter (psum_scatter): the
// collectives that concatenate or split the members' blocks along a dimension.
#include <algorithm>
#include <numeric>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/ir/axis_env.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/primitives/collectives/common.h"
#include "meshsim/primitives/collectives/cross_device_reduce.h"
#include "meshsim/primitives/families.h"

namespace meshsim {
namespace {

// Ring schedules over the replica groups: n-1 steps, each device receiving
// the n-1 blocks it lacks.
Primitive& with_gather_comm(Primitive& p) {
  with_ring_comm(p, axis_names_param, true, [](int64_t in, int64_t, int64_t n) { return in * (n - 1); },
                 [](int64_t n) { return n - 1; });
  return lowers_to(p, "all-gather");
}

// --- all_gather / all_gather_invariant --------------------------------------

Avals all_gather_eval(const std::string& name, const Avals& in, const Params& p) {
  const Aval& x = in.at(0);
  const AxisNames axes = axis_names_param(p);
  const int64_t n = group_size(name, axes, p);
  if (p.get<int64_t>("axis_size") != n)
    fail<ValueError>(name, ": axis_size=", p.get<int64_t>("axis_size"), " does not match the size ",
                     n, " of axis_name ", names_str(axes));
  const bool tiled = p.get<bool>("tiled");
  const int64_t dim = dim_param(p, "all_gather_dimension", x.ndim() + (tiled ? 0 : 1), name);
  Shape shape = x.shape;
  if (tiled) shape[dim] *= n;
  else shape.insert(shape.begin() + dim, n);
  return {like(x, shape, x.dtype, x.weak_type)};
}

// Each group's members receive the same value: one buffer, shared by them.
std::vector<Tensors> all_gather_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                       const Params& p, const Avals& out) {
  const Groups groups = replica_groups(ctx, axis_names_param(p), p);
  const bool tiled = p.get<bool>("tiled");
  const int64_t dim = p.get<int64_t>("all_gather_dimension");
  std::vector<Tensor> bufs(groups.size());
  for (auto& b : bufs) b = Tensor::empty(out[0].dtype, out[0].shape);
  for_each_member(ctx, groups, [&](int64_t g, int64_t r) {
    Tensor blk = in[groups[g][r]][0];
    if (!tiled) {
      Shape s = blk.shape();
      s.insert(s.begin() + dim, 1);
      blk = blk.reshape(s);
    }
    const int64_t c = blk.shape()[dim];
    copy_into(blk, slice_dim(bufs[g], dim, r * c, (r + 1) * c));
  });
  std::vector<Tensors> res(in.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t pos : groups[g]) res[pos] = {bufs[g]};
  return res;
}

Primitive all_gather_primitive(const std::string& name, bool invariant) {
  Primitive prim;
  prim.name = name;
  prim.operands = exactly(1);
  prim.abstract_eval = [name](const Avals& in, const Params& p) { return all_gather_eval(name, in, p); };
  prim.vma_rule = [name, invariant](const Avals& in, const Params& p) {
    if (invariant) return vma_checking() ? vma_minus(in[0].vma, axis_names_param(p)) : AxisNames{};
    return collective_vma(name, in[0], axis_names_param(p));
  };
  prim.kind = Kind::Collective;
  prim.mesh_kernel = all_gather_kernel;
  with_gather_comm(prim);
  return prim;
}

// --- reduce_scatter (psum_scatter) -----------------------------------------

Avals reduce_scatter_eval(const Avals& in, const Params& p) {
  const Aval& x = in.at(0);
  const AxisNames axes = axis_names_param(p);
  const int64_t n = group_size("reduce_scatter", axes, p);
  if (x.dtype == DType::Bool)
    fail<TypeError>("add does not accept dtype bool at position 0. Accepted dtypes at position 0 "
                    "are subtypes of integer, floating, complexfloating.");
  const int64_t dim = dim_param(p, "scatter_dimension", x.ndim(), "reduce_scatter");
  const int64_t size = x.shape[dim];
  Shape shape = x.shape;
  if (p.get<bool>("tiled")) {
    if (size % n != 0)
      fail<ValueError>("tiled reduce_scatter operand scatter dimension size ", size,
                       " must be divisible by shard_count ", n);
    shape[dim] = size / n;
  } else {
    if (size != n)
      fail<ValueError>("reduce_scatter operand scatter dimension size ", size,
                       " must match shard count ", n);
    shape.erase(shape.begin() + dim);
  }
  return {like(x, shape, x.dtype, x.weak_type)};
}

// The dimensions of `t` from outermost to innermost in memory.
std::vector<int64_t> memory_order(const Tensor& t) {
  std::vector<int64_t> perm(t.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t a, int64_t b) { return t.strides()[a] > t.strides()[b]; });
  return perm;
}

// A fresh dense tensor of `shape` whose dimensions lie in memory in `perm`'s order.
Tensor empty_in_order(DType dtype, const Shape& shape, const std::vector<int64_t>& perm) {
  Shape s;
  for (int64_t d : perm) s.push_back(shape[d]);
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return Tensor::empty(dtype, s).transpose(inverse);
}

// Member r gets chunk r (along the scatter dimension) of the sum of the
// group's blocks, added in member order as XLA's CPU runtime adds them
// (cross_device_reduce.h).
std::vector<Tensors> reduce_scatter_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                           const Params& p, const Avals& out) {
  const Groups groups = replica_groups(ctx, axis_names_param(p), p);
  const int64_t dim = p.get<int64_t>("scatter_dimension");
  const int64_t n = static_cast<int64_t>(groups[0].size());
  std::vector<Tensors> res(in.size());
  bool contiguous = true;
  for (const Tensors& t : in) contiguous &= t[0].is_contiguous();
  if (!contiguous) {
    // Strided operands (e.g. transposed gradients): each member's chunk is
    // copied into the memory order of the first member's block, which the
    // result keeps, and the dense copies are reduced.
    for_each_member(ctx, groups, [&](int64_t g, int64_t r) {
      const Tensor& first = in[groups[g][0]][0];
      const int64_t c = first.shape()[dim] / n;
      const std::vector<int64_t> perm = memory_order(first);
      Tensor o = empty_in_order(out[0].dtype, out[0].shape, perm);
      const Tensor dst = o.transpose(perm);  // o's memory in row-major order
      std::vector<Tensor> chunks;
      for (int64_t m = 0; m < n; ++m) {
        chunks.push_back(Tensor::empty(dst.dtype(), dst.shape()));
        copy_into(slice_dim(in[groups[g][m]][0], dim, r * c, (r + 1) * c).transpose(perm), chunks.back());
      }
      dispatch_number(o.dtype(), [&](auto tag) {
        using T = decltype(tag);
        std::vector<const T*> members;
        for (const Tensor& t : chunks) members.push_back(t.data<T>());
        reduce_across_members<T>(Reduce::Sum, members.data(), n, dst.data<T>(), dst.size());
      });
      res[groups[g][r]] = {o};
    });
    return res;
  }
  const std::vector<Tensor> x = contiguous_operands(ctx, in);
  const Shape& s = x[0].shape();
  int64_t outer = 1, chunk = s[dim] / n;
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  for (int64_t d = dim + 1; d < x[0].ndim(); ++d) chunk *= s[d];
  for_each_member(ctx, groups, [&](int64_t g, int64_t r) {
    Tensor o = Tensor::empty(out[0].dtype, out[0].shape);
    dispatch_number(o.dtype(), [&](auto tag) {
      using T = decltype(tag);
      std::vector<const T*> members(n);
      for (int64_t i = 0; i < outer; ++i) {  // row i of member m's chunk r
        for (int64_t m = 0; m < n; ++m) members[m] = x[groups[g][m]].data<T>() + (i * n + r) * chunk;
        reduce_across_members<T>(Reduce::Sum, members.data(), n, o.data<T>() + i * chunk, chunk);
      }
    });
    res[groups[g][r]] = {o};
  });
  return res;
}

Value transpose_all_gather(const Value& ct, const Params& p) {
  return ops::bind1("reduce_scatter", {vary_over(ct, axis_names_param(p))},
                    {{"axis_index_groups", p.is_none("axis_index_groups") ? ParamValue{}
                                                                          : ParamValue{p.get<IntLists>("axis_index_groups")}},
                     {"axis_name", axis_names_param(p)},
                     {"axis_size", p.get<int64_t>("axis_size")},
                     {"scatter_dimension", p.get<int64_t>("all_gather_dimension")},
                     {"tiled", p.get<bool>("tiled")}});
}

Value transpose_reduce_scatter(const Value& ct, const Params& p) {
  return ops::bind1("all_gather", {vary_over(ct, axis_names_param(p))},
                    {{"all_gather_dimension", p.get<int64_t>("scatter_dimension")},
                     {"axis_index_groups", p.is_none("axis_index_groups") ? ParamValue{}
                                                                          : ParamValue{p.get<IntLists>("axis_index_groups")}},
                     {"axis_name", axis_names_param(p)},
                     {"axis_size", p.get<int64_t>("axis_size")},
                     {"tiled", p.get<bool>("tiled")}});
}

// The invariant gathered cotangent: each device keeps its own chunk.
Value transpose_all_gather_invariant(const Value& ct, const Params& p) {
  const AxisNames axes = axis_names_param(p);
  const Aval& a = aval_of(ct);
  const int64_t dim = p.get<int64_t>("all_gather_dimension");
  const int64_t n = p.get<int64_t>("axis_size");
  const bool tiled = p.get<bool>("tiled");
  const int64_t chunk = tiled ? a.shape[dim] / n : 1;
  std::optional<Value> index;
  for (const auto& axis : axes) {
    Value i = ops::bind1("axis_index", {}, {{"axis_name", axis}});
    index = index ? ops::add(ops::mul(*index, ops::full({}, DType::Int32, double(current_axis_env()->mesh->axis_size(axis)))), i) : i;
  }
  Values starts;
  for (int64_t d = 0; d < a.ndim(); ++d)
    starts.push_back(d == dim ? ops::mul(*index, ops::full({}, DType::Int32, double(chunk)))
                              : ops::full({}, DType::Int32, 0.0));
  Shape sizes = a.shape;
  sizes[dim] = chunk;
  Value slice = ops::dynamic_slice(ct, starts, sizes);
  return tiled ? slice : ops::squeeze(slice, {dim});
}

// The cotangent of an unreduced_reduce_scatter: the varying chunks gathered
// whole on every device, typed reduced over the axes (JAX's all_gather to
// 'reduced'), as the cotangent of a pending sum is.
Value transpose_unreduced_reduce_scatter(const Value& ct, const Params& p) {
  const Value whole = ops::bind1("all_gather_invariant", {ct},
                                 {{"all_gather_dimension", p.get<int64_t>("scatter_dimension")},
                                  {"axis_index_groups", ParamValue{}},
                                  {"axis_name", axis_names_param(p)},
                                  {"axis_size", p.get<int64_t>("axis_size")},
                                  {"tiled", p.get<bool>("tiled")}});
  return ops::bind1("preduced", {whole}, {{"axes", axis_names_param(p)}});
}

// psum_scatter of a value unreduced over the axes (Unreduced -> Varying):
// each device's partial sum is its block, so the pending sum is performed as
// a reduce-scatter, as XLA runs it.
Primitive unreduced_reduce_scatter_primitive() {
  Primitive p;
  p.name = "unreduced_reduce_scatter";
  p.operands = exactly(1);
  p.kind = Kind::Collective;
  with_ring_comm(p, axis_names_param, true, [](int64_t, int64_t out, int64_t n) { return out * (n - 1); },
                 [](int64_t n) { return n - 1; });
  lowers_to(p, "reduce-scatter");
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const Aval& x = in.at(0);
    for (const auto& a : axis_names_param(params))
      if (!contains(x.unreduced, a))
        fail<ValueError>("unreduced_reduce_scatter only accepts inputs unreduced over its axes. Got ",
                         x.str_short(true));
    return reduce_scatter_eval(in, params);
  };
  p.vma_rule = [](const Avals& in, const Params& params) { return vma_plus(in[0].vma, axis_names_param(params)); };
  p.ur_rule = [](const Avals& in, const Params& params) -> UrAxes {
    return {vma_minus(in[0].unreduced, axis_names_param(params)), in[0].reduced};
  };
  p.mesh_kernel = reduce_scatter_kernel;
  return with_linear_vjp(p, transpose_unreduced_reduce_scatter);
}

}  // namespace

void register_gather_scatter_primitives() {
  register_primitive(unreduced_reduce_scatter_primitive());
  Primitive all_gather = all_gather_primitive("all_gather", false);
  register_primitive(with_linear_vjp(all_gather, transpose_all_gather));
  Primitive all_gather_invariant = all_gather_primitive("all_gather_invariant", true);
  register_primitive(with_linear_vjp(all_gather_invariant, transpose_all_gather_invariant));

  Primitive reduce_scatter;
  reduce_scatter.name = "reduce_scatter";
  reduce_scatter.operands = exactly(1);
  reduce_scatter.kind = Kind::Collective;
  with_ring_comm(reduce_scatter, axis_names_param, true,
                                  [](int64_t, int64_t out, int64_t n) { return out * (n - 1); },
                                  [](int64_t n) { return n - 1; });
  lowers_to(reduce_scatter, "reduce-scatter");
  reduce_scatter.abstract_eval = reduce_scatter_eval;
  reduce_scatter.vma_rule = [](const Avals& in, const Params& p) {
    return collective_vma("reduce_scatter", in[0], axis_names_param(p));
  };
  reduce_scatter.mesh_kernel = reduce_scatter_kernel;
  register_primitive(with_linear_vjp(reduce_scatter, transpose_reduce_scatter));
}

namespace {
const bool kRegistered = add_primitive_family(register_gather_scatter_primitives);  // families.h
}  // namespace

}  // namespace meshsim
