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


// Which collectives XLA's partitioner runs for a reshard: permutes of whole
// blocks, coarser layouts over other devices, re-tiles onto new or split axes,
// all-gathers and all-to-alls.

namespace meshsim::sharded {

void record_permute(const Mesh& mesh, std::vector<int64_t> sent, std::vector<int64_t> received,
                    int64_t start, int64_t block_bytes, std::vector<int64_t> among) {
  if (among.empty())
    for (int64_t pos = 0; pos < mesh.size(); ++pos) among.push_back(pos);
  AxisNames spanned;
  for (size_t k = 0; k < mesh.axis_names.size(); ++k) {
    std::set<int64_t> coords;
    for (int64_t pos : among) coords.insert(mesh.coords(pos)[k]);
    if (coords.size() > 1) spanned.push_back(mesh.axis_names[k]);
  }
  std::vector<std::vector<int64_t>> group{std::move(among)};
  CollectiveRecord r = symmetric_collective("ppermute", mesh, spanned, block_bytes, std::move(group));
  r.sent = std::move(sent);
  r.received = std::move(received);
  r.steps = 1;
  r.start_ns = start;
  record_collective(std::move(r));
}

// A reshard to a coarser layout over other devices (every dim cut into a
// divisor of its old block count, each new block whole old blocks, but not
// on the devices a plain all-gather would leave them: `P('X')` to `P('Y')` on
// 4x2, `P('X', 'Y')` to `P('Y')`), as XLA's partitioner does it: one
// collective-permute of the old blocks onto an intermediate layout that
// splits each dim further over the axes the target leaves unused (major
// axes to major dims, an axis cut into sub-axes where a dim needs fewer of
// its devices), then an all-gather per such dim over its (sub-)axes, the
// minor dim first. Returns false (nothing recorded) when the reshard is not
// of that kind.
bool record_coarser_reshard(const Mesh& mesh, const std::vector<int64_t>& from_blocks,
                            const std::vector<int64_t>& to_blocks, const Spec& to, int64_t started,
                            int64_t src_block_bytes) {
  if (from_blocks.size() != to_blocks.size()) return false;
  std::vector<int64_t> factor(from_blocks.size());
  for (size_t d = 0; d < from_blocks.size(); ++d) {
    if (from_blocks[d] % to_blocks[d] != 0) return false;
    factor[d] = from_blocks[d] / to_blocks[d];
  }
  // The axes the target leaves unused, major first, as one index space of
  // `unused_size` values; dim d takes the digit of `factor[d]` values after
  // those of the dims before it.
  const auto used = axis_places(to);
  std::vector<size_t> unused;
  int64_t unused_size = 1;
  for (size_t k = 0; k < mesh.axis_names.size(); ++k)
    if (!used.count(mesh.axis_names[k])) {
      unused.push_back(k);
      unused_size *= mesh.axis_sizes[k];
    }
  const int64_t n = mesh.size();
  std::vector<int64_t> unused_index(n, 0), unused_stride_of(mesh.axis_names.size(), 0);
  int64_t stride = unused_size;
  for (size_t k : unused) {
    stride /= mesh.axis_sizes[k];
    unused_stride_of[k] = stride;
  }
  for (int64_t pos = 0; pos < n; ++pos) {
    const std::vector<int64_t> c = mesh.coords(pos);
    for (size_t k : unused) unused_index[pos] += c[k] * unused_stride_of[k];
  }
  record_permute(mesh, std::vector<int64_t>(n, src_block_bytes), std::vector<int64_t>(n, src_block_bytes), started,
                 src_block_bytes);
  int64_t before = 1;  // values of the digits of the dims before d
  std::vector<std::pair<int64_t, int64_t>> digits(factor.size());  // (factor, values after the digit)
  for (size_t d = 0; d < factor.size(); ++d) {
    before *= factor[d];
    digits[d] = {factor[d], unused_size / before};
  }
  int64_t held = src_block_bytes;
  for (size_t d = factor.size(); d-- > 0;) {
    const auto [k, after] = digits[d];
    if (k == 1) continue;
    // The (sub-)axes the digit spans: those whose values overlap its range.
    AxisNames axes;
    for (size_t a : unused) {
      const int64_t lo = unused_stride_of[a], hi = lo * mesh.axis_sizes[a];
      if (lo < after * k && after < hi) axes.push_back(mesh.axis_names[a]);
    }
    std::map<std::vector<int64_t>, std::vector<int64_t>> group_of;
    for (int64_t pos = 0; pos < n; ++pos) {
      std::vector<int64_t> key = mesh.coords(pos);
      for (size_t a : unused) key[a] = 0;
      key.push_back(unused_index[pos] - (unused_index[pos] / after % k) * after);
      group_of[key].push_back(pos);
    }
    std::vector<std::vector<int64_t>> groups;
    for (auto& [key, members] : group_of) groups.push_back(std::move(members));
    CollectiveRecord g = symmetric_collective("all_gather", mesh, axes, held * (k - 1), std::move(groups));
    g.start_ns = started;
    record_collective(std::move(g));
    held *= k;
  }
  return true;
}

// A reshard moving one dim's axes to an unsplit dim that other, unused axes
// split too (`P('X')` to `P(None, ('Y', 'X'))` on 4x2), every other dim kept,
// as XLA's partitioner does it: where the target uses every mesh axis, each
// device slices its block over the new axes (in mesh order), an all-to-all
// over the moving axes re-tiles it (the moved axes minor to the new ones) and
// a collective-permute follows when the target orders the axes otherwise;
// where it leaves an axis unused, the moving axes are all-gathered and the
// new block sliced, as where only some of the moving axes arrive. Returns
// false (nothing recorded) when the reshard is not of that kind.
// `all_to_all_only`: only the slice, all-to-all and permute, also where the
// target leaves axes unused (false when the moving axes would be gathered).
bool record_retile_onto_new_axes(const Mesh& mesh, const Spec& from, const Spec& to, int64_t started,
                                 int64_t src_block_bytes, bool all_to_all_only) {
  if (from.size() != to.size()) return false;
  size_t losing = from.size(), gaining = from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] == to[d]) continue;
    if (to[d].empty() && losing == from.size()) losing = d;
    else if (from[d].empty() && gaining == from.size()) gaining = d;
    else return false;
  }
  if (losing == from.size() || gaining == from.size()) return false;
  const auto src = axis_places(from), dst = axis_places(to);
  // Only some of the moving axes arrive, the others leave (`P(('X', 'Y'))` to
  // `P(None, 'Y')`): XLA gathers the dim whole over all of them and slices.
  if (to[gaining].size() < from[losing].size()) {
    if (all_to_all_only) return false;
    for (const std::string& a : to[gaining])
      if (!src.count(a) || src.at(a).first != losing) return false;
    const int64_t n = entry_size(mesh, from[losing]);
    CollectiveRecord g = symmetric_collective("all_gather", mesh, from[losing], src_block_bytes * (n - 1));
    g.start_ns = started;
    record_collective(std::move(g));
    return true;
  }
  // The target's axes on the gaining dim that the operand does not use, in
  // mesh order: each device slices its block over them as the mesh orders them.
  AxisNames arriving;
  for (const std::string& a : mesh.axis_names)
    if (!src.count(a) && std::find(to[gaining].begin(), to[gaining].end(), a) != to[gaining].end())
      arriving.push_back(a);
  if (arriving.empty() || to[gaining].size() != arriving.size() + from[losing].size()) return false;
  for (const std::string& a : from[losing])
    if (!dst.count(a) || dst.at(a).first != gaining) return false;
  bool every_axis_used = true;
  for (size_t k = 0; k < mesh.axis_names.size(); ++k)
    every_axis_used &= mesh.axis_sizes[k] == 1 || dst.count(mesh.axis_names[k]) > 0;
  const int64_t n = entry_size(mesh, from[losing]);
  if (!every_axis_used && !all_to_all_only) {
    CollectiveRecord g = symmetric_collective("all_gather", mesh, from[losing], src_block_bytes * (n - 1));
    g.start_ns = started;
    record_collective(std::move(g));
    return true;
  }
  const int64_t block = src_block_bytes / entry_size(mesh, arriving);
  CollectiveRecord r = symmetric_collective("all_to_all", mesh, from[losing], block * (n - 1) / n);
  r.start_ns = started;
  record_collective(std::move(r));
  AxisNames retiled = arriving;
  retiled.insert(retiled.end(), from[losing].begin(), from[losing].end());
  if (retiled != to[gaining])
    record_permute(mesh, std::vector<int64_t>(mesh.size(), block), std::vector<int64_t>(mesh.size(), block),
                   started, block);
  return true;
}

// A reshard moving the minor axes of one dim to another dim split already,
// which the target cuts into as many more blocks (`P('X', 'Y')` to
// `P(None, ('X', 'Y'))` on 4x2, `P('Y', 'Z')` to `P(('Y', 'X'))` on 2x2x2),
// every other dim kept, as XLA's partitioner does it, going by the blocks per
// dim: an all-to-all over the moving axes re-tiles the blocks, the moved axes
// landing minor to the dim's own, then a collective-permute takes the blocks
// to the target's devices when it lays that dim out otherwise. Returns false
// (nothing recorded) when the reshard is not of that kind.
bool record_retile_onto_split_dim(const Mesh& mesh, const Spec& from, const Spec& to, int64_t started,
                                  int64_t src_block_bytes) {
  if (from.size() != to.size()) return false;
  size_t losing = from.size(), gaining = from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] == to[d]) continue;
    const bool keeps_prefix =
        to[d].size() < from[d].size() && std::equal(to[d].begin(), to[d].end(), from[d].begin());
    if (keeps_prefix && losing == from.size()) losing = d;
    else if (!from[d].empty() && entry_size(mesh, to[d]) > entry_size(mesh, from[d]) && gaining == from.size())
      gaining = d;
    else return false;
  }
  if (losing == from.size() || gaining == from.size()) return false;
  const AxisNames moving(from[losing].begin() + static_cast<std::ptrdiff_t>(to[losing].size()), from[losing].end());
  const int64_t n = entry_size(mesh, moving);
  if (entry_size(mesh, to[gaining]) != entry_size(mesh, from[gaining]) * n) return false;
  AxisNames retiled = from[gaining];
  retiled.insert(retiled.end(), moving.begin(), moving.end());
  CollectiveRecord r = symmetric_collective("all_to_all", mesh, moving, src_block_bytes * (n - 1) / n);
  r.start_ns = started;
  record_collective(std::move(r));
  if (retiled != to[gaining])
    record_permute(mesh, std::vector<int64_t>(mesh.size(), src_block_bytes),
                   std::vector<int64_t>(mesh.size(), src_block_bytes), started, src_block_bytes);
  return true;
}

void record_reshard(const Mesh& mesh, const Spec& from, const Spec& to, std::vector<int64_t> sent,
                    std::vector<int64_t> received, int64_t started, int64_t src_block_bytes) {
  int64_t most = *std::max_element(received.begin(), received.end());
  if (most == 0) return;
  // The same blocks on other devices: as XLA's partitioner moves them, one
  // collective-permute of whole blocks over every device (those keeping
  // their block send it to themselves).
  const std::vector<int64_t> from_blocks = blocks_per_dim(mesh, from), to_blocks = blocks_per_dim(mesh, to);
  if (from_blocks == to_blocks)
    return record_permute(mesh, std::move(sent), std::move(received), started, src_block_bytes);
  // One dim's blocks move to another, unsplit dim (as many blocks, over
  // other devices), other dims perhaps gathered whole: XLA all-gathers those,
  // re-tiles with an all-to-all over the moving axes (their blocks move to
  // the other dim) and then permutes the blocks to the devices of the new
  // layout when they differ.
  std::vector<size_t> losing, gaining;
  bool other_counts_kept = true;
  for (size_t d = 0; d < from_blocks.size() && d < to_blocks.size(); ++d) {
    if (from_blocks[d] == to_blocks[d]) continue;
    if (to_blocks[d] == 1) losing.push_back(d);
    else if (from_blocks[d] == 1) gaining.push_back(d);
    else other_counts_kept = false;
  }
  if (other_counts_kept && gaining.size() == 1 && !losing.empty()) {
    const size_t b = gaining[0];
    size_t a = losing.size();
    for (size_t k = 0; k < losing.size(); ++k)
      if (from_blocks[losing[k]] == to_blocks[b]) a = k;
    // The moved blocks land on other devices, or other dims are gathered too
    // (a move onto the same devices alone is the all-to-all the code below handles).
    auto moves_elsewhere = [&] {
      Spec retiled = from;
      retiled[b] = from[losing[a]];
      retiled[losing[a]].clear();
      return retiled != to;
    };
    if (a < losing.size() && (losing.size() > 1 || moves_elsewhere())) {
      AxisNames gathered_axes;
      int64_t m = 1;
      for (size_t k = 0; k < losing.size(); ++k)
        if (k != a) {
          gathered_axes.insert(gathered_axes.end(), from[losing[k]].begin(), from[losing[k]].end());
          m *= from_blocks[losing[k]];
        }
      if (m > 1) {
        CollectiveRecord g = symmetric_collective("all_gather", mesh, gathered_axes, src_block_bytes * (m - 1));
        g.start_ns = started;
        record_collective(std::move(g));
      }
      const int64_t block = src_block_bytes * m, n = from_blocks[losing[a]];
      CollectiveRecord r = symmetric_collective("all_to_all", mesh, from[losing[a]], block * (n - 1) / n);
      r.start_ns = started;
      record_collective(std::move(r));
      Spec retiled = from;
      for (size_t d : losing) retiled[d].clear();
      retiled[b] = from[losing[a]];
      if (retiled != to)
        record_permute(mesh, std::vector<int64_t>(sent.size(), block),
                       std::vector<int64_t>(received.size(), block), started, block);
      return;
    }
  }
  if (record_retile_onto_new_axes(mesh, from, to, started, src_block_bytes, false)) return;
  if (record_retile_onto_split_dim(mesh, from, to, started, src_block_bytes)) return;
  const auto src = axis_places(from), dst = axis_places(to);
  AxisNames gathered, moved;
  for (const auto& [a, place] : src) {
    auto it = dst.find(a);
    if (it == dst.end()) gathered.push_back(a);
    else if (it->second != place) moved.push_back(a);
  }
  AxisNames axes = moved;
  axes.insert(axes.end(), gathered.begin(), gathered.end());
  bool added = false;
  for (const auto& [a, place] : dst) added |= src.count(a) == 0;
  if (added || !moved.empty())
    if (record_coarser_reshard(mesh, from_blocks, to_blocks, to, started, src_block_bytes)) return;
  if (moved.empty()) {
    // Axes leaving several dims: XLA's partitioner gathers one dim at a
    // time, the minor dim first, each all-gather over that dim's leaving
    // axes (`P('X', 'Y')` to `P()`: over Y, then over X of twice the bytes).
    const std::set<std::string> leaving(gathered.begin(), gathered.end());
    std::vector<AxisNames> per_dim(from.size());
    size_t dims_gathered = 0;
    for (size_t d = 0; d < from.size(); ++d) {
      for (const std::string& a : from[d])
        if (leaving.count(a)) per_dim[d].push_back(a);
      dims_gathered += !per_dim[d].empty();
    }
    if (dims_gathered > 1) {
      int64_t held = src_block_bytes;
      for (size_t d = from.size(); d-- > 0;) {
        if (per_dim[d].empty()) continue;
        const int64_t k = entry_size(mesh, per_dim[d]);
        CollectiveRecord g = symmetric_collective("all_gather", mesh, per_dim[d], held * (k - 1));
        g.start_ns = started;
        record_collective(std::move(g));
        held *= k;
      }
      return;
    }
  }
  if (moved.empty() && added) {
    // Axes leave and others come: as XLA does it, an all-gather of whole
    // blocks over the leaving axes, then a local slice for the new ones.
    int64_t n = 1;
    for (const auto& a : gathered) n *= mesh.axis_size(a);
    std::fill(sent.begin(), sent.end(), src_block_bytes * (n - 1));
    std::fill(received.begin(), received.end(), src_block_bytes * (n - 1));
    most = src_block_bytes * (n - 1);
  }
  CollectiveRecord r = symmetric_collective(moved.empty() ? "all_gather" : "all_to_all", mesh, axes, most);
  r.sent = std::move(sent);
  r.received = std::move(received);
  r.start_ns = started;
  record_collective(std::move(r));
}

}  // namespace meshsim::sharded
