#include "meshsim/primitives/collectives/common.h"

#include "meshsim/ir/axis_env.h"

namespace meshsim {

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

// The named axes of a collective. JAX keeps `axis_name` as the caller gave
// it: one name (all_to_all) or a tuple of names.
AxisNames axis_names_param(const Params& p) {
  for (const auto& [k, v] : p.items()) {
    if (k != "axis_name") continue;
    if (auto* s = std::get_if<std::string>(&v)) return {*s};
    if (auto* l = std::get_if<StrList>(&v)) return *l;
    if (auto* l = std::get_if<IntList>(&v); l && l->empty()) return {};
    fail<TypeError>("axis_name must be an axis name or a tuple of axis names");
  }
  fail<ValueError>("missing parameter 'axis_name'");
}

std::optional<IntLists> index_groups_param(const Params& p) {
  if (p.is_none("axis_index_groups")) return std::nullopt;
  return p.get<IntLists>("axis_index_groups");
}

// The number of devices a collective over `axes` combines: the axes' total
// size, or the size of each of `axis_index_groups`, which must split the
// indices along the axes into equal groups.
int64_t group_size(const std::string& op, const AxisNames& axes, const Params& p) {
  const int64_t n = bound_axis_size(axes, op);
  const auto groups = index_groups_param(p);
  if (!groups) return n;
  std::vector<bool> seen(n, false);
  int64_t count = 0;
  for (const IntList& g : *groups) {
    if (g.size() != groups->front().size()) fail<ValueError>("Replica groups must be equally sized");
    for (int64_t i : g) {
      if (i < 0 || i >= n || seen[i])
        fail<ValueError>("axis_index_groups must cover all indices exactly once");
      seen[i] = true;
      ++count;
    }
  }
  if (count != n) fail<ValueError>("axis_index_groups must cover all indices exactly once");
  return static_cast<int64_t>(groups->front().size());
}

// The replica groups (JAX's `_replica_groups`): members in tuple order, each
// group split further by `axis_index_groups` when given.
Groups replica_groups(const MeshContext& ctx, const AxisNames& axes, const Params& p) {
  Groups base = ctx.groups(axes);
  const auto sub = index_groups_param(p);
  if (!sub) return base;
  Groups out;
  for (const auto& g : base)
    for (const IntList& ig : *sub) {
      std::vector<int64_t> members;
      for (int64_t i : ig) members.push_back(g[i]);
      out.push_back(std::move(members));
    }
  return out;
}

// JAX's `collective_vma_rule`: a varying -> varying collective needs an
// operand varying over every axis it acts on (the wrappers cast it first).
Batched batch_in_place(const BatchArgs& a) { return Batched{bind(a.prim, a.in, a.params), a.dims}; }

AxisNames collective_vma(const std::string& name, const Aval& x, const AxisNames& axes) {
  if (!vma_checking()) return {};
  for (const auto& n : axes)
    if (!contains(x.vma, n))
      fail<ValueError>("Collective ", name, " must be applied to a device-varying  type, but got ",
                       frozenset_str(x.vma), " for collective acting over axis name ",
                       names_str(axes), ". Please open an issue at "
                       "https://github.com/jax-ml/jax/issues and as a temporary workaround pass "
                       "the check_vma=False argument to `jax.shard_map`");
  return x.vma;
}

int64_t dim_param(const Params& p, const char* name, int64_t bound, const std::string& op) {
  const int64_t d = p.get<int64_t>(name);
  if (d < 0 || d >= bound)
    fail<ValueError>(op, ": ", name, "=", d, " is out of bounds for ", bound, " dimensions");
  return d;
}

Tensor slice_dim(const Tensor& t, int64_t dim, int64_t lo, int64_t hi) {
  std::vector<int64_t> start(t.ndim(), 0), stop(t.shape()), step(t.ndim(), 1);
  start[dim] = lo;
  stop[dim] = hi;
  return t.slice(start, stop, step);
}

// Every device's first operand in row-major layout (the kernels index it directly).
std::vector<Tensor> contiguous_operands(const MeshContext& ctx, const std::vector<Tensors>& in,
                                        size_t k) {
  std::vector<Tensor> out(in.size());
  ctx.parallel_for(static_cast<int64_t>(in.size()), [&](int64_t d) { out[d] = in[d][k].contiguous(); });
  return out;
}

// Runs f(group, member) for every member of every group.
void for_each_member(const MeshContext& ctx, const Groups& groups,
                     const std::function<void(int64_t, int64_t)>& f) {
  const int64_t n = static_cast<int64_t>(groups[0].size());
  ctx.parallel_for(static_cast<int64_t>(groups.size()) * n, [&](int64_t t) { f(t / n, t % n); });
}

// A rule that maps the one operand's cotangent through `transpose`.
Primitive& with_linear_vjp(Primitive& p, std::function<Value(const Value& ct, const Params&)> transpose) {
  p.vjp = [transpose](const VjpArgs& a) -> Cotangents {
    if (!a.ct[0] || !a.wants[0]) return {std::nullopt};
    return {transpose(*a.ct[0], a.params)};
  };
  return p;
}

Params with(Params p, const std::string& key, ParamValue v) {
  p.set(key, std::move(v));
  return p;
}

ParamValue index_groups_value(const Params& p) {
  return p.is_none("axis_index_groups") ? ParamValue{} : ParamValue{p.get<IntLists>("axis_index_groups")};
}

int64_t nbytes(const Tensor& t) { return t.size() * static_cast<int64_t>(itemsize(t.dtype())); }

Traffic symmetric_traffic(const MeshContext& ctx, AxisNames axes, Groups groups, int64_t bytes,
                          int64_t steps) {
  Traffic t;
  t.axes = std::move(axes);
  t.groups = std::move(groups);
  t.sent.assign(ctx.num_devices(), 0);
  t.received.assign(ctx.num_devices(), 0);
  for (const auto& g : t.groups)
    for (int64_t pos : g) t.sent[pos] = t.received[pos] = bytes;
  t.steps = steps;
  return t;
}

int64_t nbytes(const Aval& a) { return num_elements(a.shape) * static_cast<int64_t>(itemsize(a.dtype)); }

Primitive& with_ring_comm(Primitive& prim, std::function<AxisNames(const Params&)> axes_of,
                          bool index_groups, RingBytes bytes, std::function<int64_t(int64_t n)> steps) {
  prim.comm_steps = steps;
  prim.comm_bytes = [bytes](const Avals& in, const Avals& out, int64_t n) {
    int64_t moved = 0;
    for (size_t i = 0; i < in.size() && i < out.size(); ++i) moved += bytes(nbytes(in[i]), nbytes(out[i]), n);
    return moved;
  };
  prim.comm = [=](const MeshContext& ctx, const std::vector<Tensors>& in, const Params& p, const Avals& out) {
    const AxisNames axes = axes_of(p);
    Groups groups = index_groups ? replica_groups(ctx, axes, p) : ctx.groups(axes);
    const int64_t n = static_cast<int64_t>(groups.front().size());
    int64_t moved = 0;
    for (size_t i = 0; i < in[0].size() && i < out.size(); ++i)
      moved += bytes(nbytes(in[0][i]), nbytes(out[i]), n);
    return symmetric_traffic(ctx, axes, std::move(groups), moved, n > 1 ? steps(n) : 0);
  };
  return prim;
}

}  // namespace meshsim
