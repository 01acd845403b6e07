// Collectives and the VMA casts: the primitives that exist only inside a
// shard_map body. Each collective's `mesh_kernel` runs once over all devices'
// blocks (runtime/mesh_executor.h); its groups follow JAX's replica groups:
// devices that differ only along the named axes, members in tuple order.
#include <algorithm>

#include "meshsim/ir/axis_env.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/mesh_executor.h"

namespace meshsim {
namespace {

const StrList& axes_param(const Params& p) { return p.get<StrList>("axes"); }

bool contains(const AxisNames& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

std::string names_str(const AxisNames& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() == 1 ? ",)" : ")");
}

std::string frozenset_str(const AxisNames& names) {
  if (names.empty()) return "frozenset()";
  std::string s = "frozenset({";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + "})";
}

// `names` with `drop` removed / `add` appended, in mesh order.
AxisNames vma_minus(const AxisNames& vma, const AxisNames& drop) {
  AxisNames out;
  for (const auto& n : vma)
    if (!contains(drop, n)) out.push_back(n);
  return out;
}
AxisNames vma_plus(const AxisNames& vma, const AxisNames& add) {
  AxisNames out = vma;
  for (const auto& n : add)
    if (!contains(out, n)) out.push_back(n);
  const AxisEnv* env = current_axis_env();
  return env ? env->mesh->in_mesh_order(out) : out;
}

// An all-reduce: each group's members get one shared tensor holding the
// elementwise reduction of their blocks, combined in member order (so the
// result is the same whatever the thread count).
enum class Reduce { Sum, Max, Min };

Tensor reduce_blocks(const std::vector<const Tensor*>& blocks, Reduce op, const MeshContext& ctx) {
  Tensor out = blocks[0]->copy();
  if (blocks.size() == 1) return out;
  std::vector<Tensor> srcs;
  for (size_t i = 1; i < blocks.size(); ++i) srcs.push_back(blocks[i]->contiguous());
  dispatch_numeric(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const int64_t n = out.size();
    constexpr int64_t kChunk = 1 << 16;  // elements per task: big blocks reduce in parallel
    ctx.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
      const int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
      for (const Tensor& s : srcs) {
        const T* x = s.data<T>();
        switch (op) {
          case Reduce::Sum: for (int64_t i = lo; i < hi; ++i) o[i] += x[i]; break;
          case Reduce::Max: for (int64_t i = lo; i < hi; ++i) o[i] = std::max(o[i], x[i]); break;
          case Reduce::Min: for (int64_t i = lo; i < hi; ++i) o[i] = std::min(o[i], x[i]); break;
        }
      }
    });
  });
  return out;
}

std::vector<Tensors> all_reduce(const MeshContext& ctx, const std::vector<Tensors>& in,
                                const AxisNames& axes, Reduce op) {
  std::vector<Tensors> out(in.size(), Tensors(in[0].size()));
  const auto groups = ctx.groups(axes);
  for (size_t k = 0; k < in[0].size(); ++k)
    ctx.parallel_for(static_cast<int64_t>(groups.size()), [&](int64_t g) {
      std::vector<const Tensor*> blocks;
      for (int64_t pos : groups[g]) blocks.push_back(&in[pos][k]);
      Tensor r = reduce_blocks(blocks, op, ctx);
      for (int64_t pos : groups[g]) out[pos][k] = r;  // one buffer for the whole group
    });
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
  if (in.empty()) fail<TypeError>(name, " needs at least one operand");
  return in;
}

Primitive all_reduce_primitive(const std::string& name, Reduce op) {
  Primitive p;
  p.name = name;
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
  return p;
}

}  // namespace

void register_collective_primitives() {
  // psum over manual axes: psum_invariant with VMA checking (varying ->
  // invariant), plain psum without, as JAX names them.
  register_primitive(all_reduce_primitive("psum_invariant", Reduce::Sum));
  register_primitive(all_reduce_primitive("psum", Reduce::Sum));
  register_primitive(all_reduce_primitive("pmax", Reduce::Max));
  register_primitive(all_reduce_primitive("pmin", Reduce::Min));

  // pvary: invariant -> varying. Only the type changes; at run time it is the
  // identity (the devices along the axes already hold equal values).
  Primitive pvary;
  pvary.name = "pvary";
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
  pvary.kernel = [](const Tensors& in, const Params&, const Avals&) { return in; };
  register_primitive(std::move(pvary));

  // axis_index: this device's coordinate along one manual axis (int32, varying over it).
  Primitive axis_index;
  axis_index.name = "axis_index";
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

}  // namespace meshsim
