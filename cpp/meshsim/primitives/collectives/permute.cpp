// ppermute and pbroadcast: collectives in which a member's block goes to
// other members whole.

#include "meshsim/ir/axis_env.h"
#include "meshsim/primitives/collectives/common.h"
#include "meshsim/primitives/families.h"

namespace meshsim {
namespace {

// --- ppermute -----------------------------------------------------------------

// `perm` as (src, dst) pairs with negative indices wrapped (as JAX indexes
// the group); raises for pairs out of range or not unique.
std::vector<std::pair<int64_t, int64_t>> perm_pairs(const Params& p, const AxisNames& axes,
                                                    int64_t n) {
  IntLists perm;
  for (const auto& [k, v] : p.items())
    if (k == "perm") {
      if (auto* l = std::get_if<IntLists>(&v)) perm = *l;
      else if (auto* e = std::get_if<IntList>(&v); !e || !e->empty())
        fail<TypeError>("ppermute perm must be a sequence of (source, destination) pairs");
    }
  std::vector<std::pair<int64_t, int64_t>> pairs;
  std::vector<bool> src_seen(n, false), dst_seen(n, false);
  bool unique = true;
  for (const IntList& pr : perm) {
    if (pr.size() != 2)
      fail<ValueError>("ppermute perm entries must be (source, destination) pairs, got ",
                       param_value_str(pr), " in perm ", param_value_str(perm));
    for (int64_t i : pr)
      if (i < -n || i >= n)
        fail<ValueError>("ppermute index ", i, " in perm entry ", param_value_str(pr),
                         " is out of range for axis_name ", names_str(axes), " of size ", n,
                         ": indices must be in [0, ", n, ")");
    const int64_t src = (pr[0] + n) % n, dst = (pr[1] + n) % n;
    unique = unique && !src_seen[src] && !dst_seen[dst];
    src_seen[src] = dst_seen[dst] = true;
    pairs.emplace_back(src, dst);
  }
  if (!unique)
    fail<ValueError>("ppermute sources and destinations must be unique, got ",
                     param_value_str(perm), ".");
  return pairs;
}

// Indices in `perm` refer to the group's devices in mesh order, whatever the
// order of the names in `axis_name` (JAX <= 0.11 sorts the replica groups).
std::vector<Tensors> ppermute_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                     const Params& p, const Avals& out) {
  const AxisNames axes = axis_names_param(p);
  const Groups groups = ctx.groups(ctx.mesh().in_mesh_order(axes));
  const int64_t n = static_cast<int64_t>(groups[0].size());
  std::vector<int64_t> src_of(n, -1);
  for (auto [src, dst] : perm_pairs(p, axes, n)) src_of[dst] = src;
  // Blocks are immutable once computed, so a receiver holds its source's
  // block itself (what a copy would read) and the devices receiving nothing
  // share one block of zeros: no bytes move and no device waits on another.
  std::vector<Tensors> res(in.size());
  Tensor zeros;
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t r = 0; r < n; ++r) {
      if (src_of[r] >= 0) {
        res[groups[g][r]] = {in[groups[g][src_of[r]]][0]};
        continue;
      }
      if (!zeros.defined()) zeros = Tensor::zeros(out[0].dtype, out[0].shape);
      res[groups[g][r]] = {zeros};
    }
  return res;
}

// --- pbroadcast ----------------------------------------------------------------

std::vector<Tensors> pbroadcast_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                       const Params& p, const Avals&) {
  const Groups groups = ctx.groups(axis_names_param(p));
  const int64_t source = p.get<int64_t>("source");
  std::vector<Tensor> bufs(groups.size());
  ctx.parallel_for(static_cast<int64_t>(groups.size()),
                   [&](int64_t g) { bufs[g] = in[groups[g][source]][0].copy(); });
  std::vector<Tensors> res(in.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t pos : groups[g]) res[pos] = {bufs[g]};
  return res;
}


Value transpose_ppermute(const Value& ct, const Params& p) {
  const AxisNames axes = axis_names_param(p);
  IntLists inverse;
  for (const auto& [src, dst] : perm_pairs(p, axes, bound_axis_size(axes, "ppermute")))
    inverse.push_back({dst, src});
  return ops::bind1("ppermute", {vary_over(ct, axis_names_param(p))},
                    with(p, "perm", inverse));
}

// One step: each source sends its block to its destination; devices that are
// neither send or receive nothing.
Traffic ppermute_traffic(const MeshContext& ctx, const std::vector<Tensors>& in, const Params& p,
                         const Avals&) {
  const AxisNames axes = axis_names_param(p);
  const int64_t bytes = nbytes(in[0][0]);
  Traffic t = symmetric_traffic(ctx, axes, ctx.groups(ctx.mesh().in_mesh_order(axes)), 0, 1);
  const int64_t n = static_cast<int64_t>(t.groups.front().size());
  for (const auto& [src, dst] : perm_pairs(p, axes, n))
    for (const auto& g : t.groups) {
      t.sent[g[src]] += bytes;
      t.received[g[dst]] += bytes;
    }
  return t;
}

}  // namespace

void register_permute_primitives() {
  Primitive ppermute;
  ppermute.name = "ppermute";
  ppermute.operands = exactly(1);
  ppermute.kind = Kind::Collective;
  ppermute.comm = ppermute_traffic;
  ppermute.comm_steps = [](int64_t) { return int64_t{1}; };  // every pair exchanges at once
  ppermute.comm_bytes = [](const Avals& in, const Avals&, int64_t) { return nbytes(in[0]); };
  lowers_to(ppermute, "collective-permute");
  ppermute.abstract_eval = [](const Avals& in, const Params& p) {
    const AxisNames axes = axis_names_param(p);
    perm_pairs(p, axes, bound_axis_size(axes, "ppermute"));
    return Avals{in.at(0)};
  };
  ppermute.vma_rule = [](const Avals& in, const Params& p) {
    return collective_vma("ppermute", in[0], axis_names_param(p));
  };
  ppermute.mesh_kernel = ppermute_kernel;
  ppermute.batch = batch_in_place;
  register_primitive(with_linear_vjp(ppermute, transpose_ppermute));


  // pbroadcast: every member gets member `source`'s block (typed varying, as JAX).
  Primitive pbroadcast;
  pbroadcast.name = "pbroadcast";
  pbroadcast.operands = exactly(1);
  pbroadcast.result_is_operand_view = true;
  pbroadcast.kind = Kind::Collective;
  // Counted as every member receiving the source's block in one step.
  with_ring_comm(pbroadcast, axis_names_param, false, [](int64_t in, int64_t, int64_t) { return in; },
                              [](int64_t) { return 1; });
  lowers_to(pbroadcast, "collective-broadcast");
  pbroadcast.abstract_eval = [](const Avals& in, const Params& p) {
    const AxisNames axes = axis_names_param(p);
    const int64_t n = bound_axis_size(axes, "pbroadcast"), source = p.get<int64_t>("source");
    if (source < 0 || source >= n)
      fail<ValueError>("pbroadcast source ", source, " is out of range for axis_name ",
                       names_str(axes), " of size ", n);
    return Avals{in.at(0)};
  };
  pbroadcast.vma_rule = [](const Avals& in, const Params& p) {
    return collective_vma("pbroadcast", in[0], axis_names_param(p));
  };
  pbroadcast.mesh_kernel = pbroadcast_kernel;
  pbroadcast.batch = batch_in_place;
  register_primitive(std::move(pbroadcast));
}

namespace {
const bool kRegistered = add_primitive_family(register_permute_primitives);  // families.h
}  // namespace

}  // namespace meshsim
