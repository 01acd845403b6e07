#include "meshsim/runtime/sharded_blocks.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/core/strided.h"
#include "meshsim/ir/xla_instruction.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/runtime/sub_program_calls.h"
#include "meshsim/runtime/timeline.h"
#include "meshsim/sharding/rules.h"


namespace meshsim {

namespace sharded {

// ---- all-reduce of partial results -------------------------------------------------------

void all_reduce(const Mesh& mesh, std::vector<Tensor>& per_device, const AxisNames& axes,
                const std::string& op) {
  const AxisNames ordered = mesh.in_mesh_order(axes);
  std::vector<Tensors> in(per_device.size());
  for (size_t pos = 0; pos < per_device.size(); ++pos) in[pos] = {per_device[pos]};
  Aval block;
  block.shape = per_device[0].shape();
  block.dtype = per_device[0].dtype();
  MeshContext ctx(mesh);
  std::vector<Tensors> out = run_collective(partials_all_reduce(op), ctx, in, Params{{"axes", StrList(ordered)}}, {block});
  for (size_t pos = 0; pos < per_device.size(); ++pos) per_device[pos] = std::move(out[pos][0]);
}

AxisNames without(const AxisNames& a, const AxisNames& b) {
  AxisNames out;
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
  return out;
}

}  // namespace sharded

using namespace sharded;

// ---- reshard ------------------------------------------------------------------------------

namespace {

// A value that stays unreduced is a different partial sum on each device
// along its unreduced axes, so no device can take another's block: only a
// layout each device cuts from its own block is reached (a local slice).
ArrayPtr slice_partials(const ArrayPtr& x, const ShardingPtr& dst, const Aval& out) {
  const Sharding& src = *x->sharding();
  const Shape sl = src.local_shape(out.shape), dl = dst->local_shape(out.shape);
  std::vector<Tensor> per_device(x->shards().size());
  for (size_t pos = 0; pos < per_device.size(); ++pos) {
    const Box have = block_box(src, static_cast<int64_t>(pos), sl);
    const Box want = block_box(*dst, static_cast<int64_t>(pos), dl);
    if (!src.mesh || !contains(have, want))
      fail<NotImplementedError>("meshsim reshards a value that stays unreduced over ",
                                spec_entry_str(out.unreduced), " only to a layout each device slices from "
                                "its own block; reshard it to a reduced layout first");
    per_device[pos] = view_of(x->shards()[pos], have, want);
  }
  return std::make_shared<Array>(out, dst, std::move(per_device));
}

// The blocks of `x` moved to the layout `spec_in` over `mesh` (types without
// pending reductions, or ones kept as they are: see reshard_array).
ArrayPtr relayout(const ArrayPtr& x, const MeshPtr& mesh, const Spec& spec_in, const Aval& out) {
  const int64_t started = timeline::active() ? timeline::now_ns() : -1;
  const Shape& global = out.shape;
  const size_t ndim = global.size();
  const Spec spec = pad_spec(spec_in, ndim);
  auto dst = std::make_shared<Sharding>(sharding_of(mesh, spec));
  const Sharding& src = *x->sharding();
  const bool on_mesh = src.mesh && same_devices(*src.mesh, *mesh);
  if (on_mesh && pad_spec(src.spec, ndim) == spec)
    return std::make_shared<Array>(out, dst, x->shards());
  if (!out.unreduced.empty()) return slice_partials(x, dst, out);

  const int64_t n = mesh->size();
  const Shape dl = dst->local_shape(global);
  // Distinct destination blocks, each made once and shared by its devices.
  std::map<std::vector<int64_t>, int64_t> block_id;
  std::vector<int64_t> block_of(n);
  std::vector<int64_t> first_pos;
  for (int64_t pos = 0; pos < n; ++pos) {
    auto [it, fresh] = block_id.emplace(dst->block_index(pos, ndim), static_cast<int64_t>(first_pos.size()));
    if (fresh) first_pos.push_back(pos);
    block_of[pos] = it->second;
  }
  std::vector<Tensor> blocks(first_pos.size());

  if (!on_mesh) {
    // A value on one device (or another mesh's devices): sliced from the whole.
    const Tensor whole = x->global();
    const Box all{std::vector<int64_t>(ndim, 0), std::vector<int64_t>(global.begin(), global.end())};
    for (size_t b = 0; b < first_pos.size(); ++b)
      blocks[b] = view_of(whole, all, block_box(*dst, first_pos[b], dl));
  } else {
    const Shape sl = src.local_shape(global);
    const std::vector<Tensor>& shards = x->shards();
    // Distinct source blocks, and the devices holding each.
    std::map<std::vector<int64_t>, int64_t> src_seen;
    std::vector<int64_t> src_pos, src_block(n);
    std::vector<std::vector<int64_t>> holders;
    for (int64_t pos = 0; pos < n; ++pos) {
      auto [it, fresh] = src_seen.emplace(src.block_index(pos, ndim), static_cast<int64_t>(src_pos.size()));
      if (fresh) {
        src_pos.push_back(pos);
        holders.emplace_back();
      }
      src_block[pos] = it->second;
      holders[it->second].push_back(pos);
    }
    struct Piece { int64_t block, from; Box box; };
    std::vector<Piece> pieces;
    for (size_t b = 0; b < first_pos.size(); ++b) {
      const Box want = block_box(*dst, first_pos[b], dl);
      // A device whose own block covers this one takes a view: nothing moves.
      int64_t holder = -1;
      for (int64_t pos = first_pos[b]; pos < n && holder < 0; ++pos)
        if (block_of[pos] == static_cast<int64_t>(b) && contains(block_box(src, pos, sl), want)) holder = pos;
      if (holder >= 0) {
        blocks[b] = view_of(shards[holder], block_box(src, holder, sl), want);
        continue;
      }
      blocks[b] = Tensor::empty(out.dtype, dl);
      for (int64_t from : src_pos) {
        Box part = intersect(want, block_box(src, from, sl));
        if (part.size() > 0) pieces.push_back({static_cast<int64_t>(b), from, part});
      }
    }
    // Pieces write disjoint parts of the new blocks: copy them in parallel.
    MeshContext ctx(*mesh);
    ctx.parallel_for(static_cast<int64_t>(pieces.size()), [&](int64_t i) {
      const Piece& p = pieces[i];
      const Box at = block_box(*dst, first_pos[p.block], dl);
      copy_into(view_of(shards[p.from], block_box(src, p.from, sl), p.box),
                view_of(blocks[p.block], at, p.box));
    });
    // What each device receives: its new block minus what it already held,
    // each part sent by one of the devices holding it (spread over them).
    const int64_t item = static_cast<int64_t>(itemsize(out.dtype));
    std::vector<int64_t> sent(n, 0), received(n, 0);
    for (int64_t pos = 0; pos < n; ++pos) {
      const Box want = block_box(*dst, pos, dl);
      for (size_t s = 0; s < src_pos.size(); ++s) {
        if (static_cast<int64_t>(s) == src_block[pos]) continue;
        const int64_t part = intersect(want, block_box(src, src_pos[s], sl)).size() * item;
        if (part == 0) continue;
        received[pos] += part;
        sent[holders[s][pos % holders[s].size()]] += part;
      }
    }
    // Each new block within one old block (the split made finer over other
    // axes, or the same blocks elsewhere): XLA's partitioner cuts it from
    // there and moves it with one collective-permute over every device.
    bool within_old = true;
    for (int64_t pos = 0; pos < n && within_old; ++pos) {
      const Box want = block_box(*dst, pos, dl);
      bool found = false;
      for (int64_t from : src_pos) found = found || contains(block_box(src, from, sl), want);
      within_old = found;
    }
    if (within_old && *std::max_element(received.begin(), received.end()) > 0)
      record_permute(*mesh, std::move(sent), std::move(received), started, num_elements(dl) * item);
    else
      record_reshard(*mesh, pad_spec(src.spec, ndim), spec, std::move(sent), std::move(received), started,
                     num_elements(sl) * item);
  }
  std::vector<Tensor> per_device(n);
  for (int64_t pos = 0; pos < n; ++pos) per_device[pos] = blocks[block_of[pos]];
  return std::make_shared<Array>(out, dst, std::move(per_device));
}

// `x`, unreduced over `axes` among others, summed over them: XLA all-reduces
// the devices' blocks as they are laid out (a layout that then shards those
// axes slices the sum locally).
ArrayPtr reduce_partials(const ArrayPtr& x, const MeshPtr& mesh, const AxisNames& axes) {
  std::vector<Tensor> per_device = x->shards();
  all_reduce(*mesh, per_device, axes, "sum");
  Aval a = x->aval();
  a.unreduced = without(a.unreduced, axes);
  return std::make_shared<Array>(a, x->sharding(), std::move(per_device));
}

// `x` (whole) as partial sums over `axes` laid out as `spec`: each device keeps
// the part of its new block that its own block of `x` covers along those axes
// (all of it at coordinate 0 of an axis `x` is not split over) and zeros
// elsewhere, so the sum over `axes` is `x` and no data moves for them.
ArrayPtr split_into_partials(const ArrayPtr& x, const MeshPtr& mesh, const Spec& spec_in, const Aval& out,
                             const AxisNames& axes) {
  const size_t ndim = out.shape.size();
  const Spec spec = pad_spec(spec_in, ndim);
  const Sharding& src = *x->sharding();
  const bool on_mesh = src.mesh && same_devices(*src.mesh, *mesh);
  const Spec have = on_mesh ? pad_spec(src.spec, ndim) : Spec(ndim);
  // Each dimension split as the result, then over the axes `x` splits it over.
  Spec pieces_spec = spec;
  AxisNames kept;
  for (size_t d = 0; d < ndim; ++d)
    for (const auto& a : have[d])
      if (std::find(axes.begin(), axes.end(), a) != axes.end()) {
        pieces_spec[d].push_back(a);
        kept.push_back(a);
      }
  Aval pieces_aval = out;
  pieces_aval.unreduced.clear();
  pieces_aval.spec = explicit_part(pieces_spec, *mesh, ndim);
  const ArrayPtr pieces = relayout(x, mesh, pieces_spec, pieces_aval);
  auto dst = std::make_shared<Sharding>(sharding_of(mesh, spec));
  const Sharding& ps = *pieces->sharding();
  const Shape dl = dst->local_shape(out.shape), pl = ps.local_shape(out.shape);
  const AxisNames zero_unless_first = without(axes, kept);
  std::vector<Tensor> per_device(mesh->size());
  MeshContext ctx(*mesh);
  ctx.parallel_for(mesh->size(), [&](int64_t pos) {
    Tensor block = Tensor::zeros(out.dtype, dl);
    bool holds = true;
    const std::vector<int64_t> at = mesh->coords(pos);
    for (const auto& a : zero_unless_first) holds &= at[mesh->axis_position(a)] == 0;
    if (holds) {
      const Box whole = block_box(*dst, pos, dl);
      copy_into(pieces->shards()[pos], view_of(block, whole, block_box(ps, pos, pl)));
    }
    per_device[pos] = std::move(block);
  });
  return std::make_shared<Array>(out, dst, std::move(per_device));
}
}  // namespace

ArrayPtr reshard_array(const ArrayPtr& x_in, const MeshPtr& mesh, const Spec& spec, const Aval& out) {
  ArrayPtr x = x_in;
  const AxisNames reduce = without(x->aval().unreduced, out.unreduced);
  const AxisNames split = without(out.unreduced, x->aval().unreduced);
  if (!reduce.empty()) x = reduce_partials(x, mesh, reduce);
  if (split.empty()) return relayout(x, mesh, spec, out);
  if (!x->aval().unreduced.empty())
    fail<NotImplementedError>("meshsim does not reshard a value unreduced over ",
                              spec_entry_str(x->aval().unreduced), " to one also unreduced over ",
                              spec_entry_str(split));
  return split_into_partials(x, mesh, spec, out, split);
}

}  // namespace meshsim
