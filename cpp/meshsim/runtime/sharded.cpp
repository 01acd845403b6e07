#include "meshsim/runtime/sharded.h"

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

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace meshsim {

// ---- the collective log -------------------------------------------------------------

namespace {
std::mutex g_log_mutex;
std::vector<std::vector<CollectiveRecord>> g_recorders;
}  // namespace

void push_collective_recorder() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_recorders.emplace_back();
}

std::vector<CollectiveRecord> pop_collective_recorder() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  if (g_recorders.empty()) return {};
  std::vector<CollectiveRecord> out = std::move(g_recorders.back());
  g_recorders.pop_back();
  return out;
}

bool recording_collectives() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  return !g_recorders.empty();
}

CollectiveRecord symmetric_collective(std::string name, const Mesh& mesh, const AxisNames& axes,
                                      int64_t bytes, std::vector<std::vector<int64_t>> groups) {
  const size_t n = static_cast<size_t>(mesh.size());
  if (groups.empty()) groups = MeshContext(mesh).groups(axes);
  const int64_t steps = static_cast<int64_t>(groups.front().size()) - 1;
  return {std::move(name), mesh.in_mesh_order(axes), bytes, mesh.device_ids, std::move(groups),
          std::vector<int64_t>(n, bytes), std::vector<int64_t>(n, bytes), steps};
}

std::vector<Tensors> run_collective(const Primitive& prim, const MeshContext& ctx,
                                    const std::vector<Tensors>& in, const Params& params,
                                    const Avals& out) {
  const int64_t started = timeline::active() ? timeline::now_ns() : -1;
  std::vector<Tensors> res = prim.mesh_kernel(ctx, in, params, out);
  if (started < 0 && !recording_collectives()) return res;
  Traffic t = prim.comm(ctx, in, params, out);
  if (!t.moves_data()) return res;
  const Mesh& mesh = ctx.mesh();
  CollectiveRecord r{prim.name, mesh.in_mesh_order(t.axes), 0, mesh.device_ids, std::move(t.groups),
                     std::move(t.sent), std::move(t.received), t.steps, started};
  r.bytes_per_device = *std::max_element(r.received.begin(), r.received.end());
  record_collective(std::move(r));
  return res;
}

namespace {
// The collective as a span on every device of its mesh, from its start until now.
void add_to_timeline(const CollectiveRecord& r) {
  const int64_t now = timeline::now_ns();
  const int64_t start = r.start_ns >= 0 ? r.start_ns : now;
  for (const auto& group : r.groups)
    for (int64_t pos : group) {
      TimelineEvent e;
      e.name = r.name;
      e.category = "collective";
      e.device = r.device_ids[pos];
      e.start_ns = start;
      e.dur_ns = now - start;
      e.axes = r.axes;
      for (int64_t q : group) e.group.push_back(r.device_ids[q]);
      e.bytes_sent = r.sent[pos];
      e.bytes_received = r.received[pos];
      e.steps = r.steps;
      timeline::record(std::move(e));
    }
}
}  // namespace

namespace {
thread_local AllReduceCombiner* t_combiner = nullptr;

thread_local SubProgramRecords* t_sub_program_records = nullptr;

void log_record(const CollectiveRecord& record) {
  if (t_sub_program_records) return t_sub_program_records->take(record);
  std::lock_guard<std::mutex> lock(g_log_mutex);
  for (auto& r : g_recorders) r.push_back(record);
}

void record_now(CollectiveRecord record) {
  if (timeline::active()) add_to_timeline(record);
  log_record(record);
}
}  // namespace

SubProgramRecords::SubProgramRecords() : outer_(t_sub_program_records) { t_sub_program_records = this; }

SubProgramRecords::~SubProgramRecords() {
  t_sub_program_records = outer_;
  for (const CollectiveRecord& r : kept_) log_record(r);
}

SubProgramRecords* SubProgramRecords::current() { return t_sub_program_records; }

AllReduceCombiner::AllReduceCombiner() : outer_(t_combiner) { t_combiner = this; }

AllReduceCombiner::~AllReduceCombiner() {
  t_combiner = outer_;
  flush();
}

bool AllReduceCombiner::hold(CollectiveRecord& record) {
  const Primitive& collective = primitive(record.name);
  if (!collective.is_collective() || collective.partials_reduction.empty()) return false;
  if (dependent_) flush();
  ++holds_;
  for (CollectiveRecord& h : held_)
    if (h.name == record.name && h.axes == record.axes && h.groups == record.groups) {
      h.bytes_per_device += record.bytes_per_device;
      for (size_t i = 0; i < h.sent.size(); ++i) {
        h.sent[i] += record.sent[i];
        h.received[i] += record.received[i];
      }
      return true;
    }
  held_.push_back(std::move(record));
  return true;
}

void AllReduceCombiner::flush() {
  if (held_.empty()) return;
  ++flushes_;
  for (CollectiveRecord& r : held_) record_now(std::move(r));
  held_.clear();
}

void record_collective(CollectiveRecord record) {
  if (t_combiner && t_combiner->hold(record)) return;
  record_now(std::move(record));
}

namespace {

// One BLAS thread per device task while devices run in parallel.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SingleThreadedBlas() { openblas_set_num_threads(saved_); }

 private:
  int saved_;
};

// ---- block geometry ---------------------------------------------------------------------

struct Box {
  std::vector<int64_t> lo, hi;  // per dimension, [lo, hi)
  int64_t size() const {
    int64_t n = 1;
    for (size_t d = 0; d < lo.size(); ++d) n *= std::max<int64_t>(0, hi[d] - lo[d]);
    return n;
  }
};

Box block_box(const Sharding& s, int64_t pos, const Shape& local) {
  const int64_t ndim = static_cast<int64_t>(local.size());
  std::vector<int64_t> bi = s.block_index(pos, ndim);
  Box b{std::vector<int64_t>(ndim), std::vector<int64_t>(ndim)};
  for (int64_t d = 0; d < ndim; ++d) {
    b.lo[d] = bi[d] * local[d];
    b.hi[d] = b.lo[d] + local[d];
  }
  return b;
}

Box intersect(const Box& a, const Box& b) {
  Box r = a;
  for (size_t d = 0; d < a.lo.size(); ++d) {
    r.lo[d] = std::max(a.lo[d], b.lo[d]);
    r.hi[d] = std::min(a.hi[d], b.hi[d]);
  }
  return r;
}

bool contains(const Box& outer, const Box& inner) {
  for (size_t d = 0; d < outer.lo.size(); ++d)
    if (inner.lo[d] < outer.lo[d] || inner.hi[d] > outer.hi[d]) return false;
  return true;
}

// The part of `t` (holding box `at`) covering `box`.
Tensor view_of(const Tensor& t, const Box& at, const Box& box) {
  const size_t ndim = box.lo.size();
  std::vector<int64_t> start(ndim), stop(ndim), step(ndim, 1);
  for (size_t d = 0; d < ndim; ++d) {
    start[d] = box.lo[d] - at.lo[d];
    stop[d] = box.hi[d] - at.lo[d];
  }
  return t.slice(start, stop, step);
}

Sharding sharding_of(const MeshPtr& mesh, const Spec& spec) {
  Sharding s;
  s.mesh = mesh;
  s.spec = spec;
  return s;
}

// The axes a spec uses, and where: axis -> (dimension, position in the tuple).
std::map<std::string, std::pair<size_t, size_t>> axis_places(const Spec& spec) {
  std::map<std::string, std::pair<size_t, size_t>> out;
  for (size_t d = 0; d < spec.size(); ++d)
    for (size_t i = 0; i < spec[d].size(); ++i) out[spec[d][i]] = {d, i};
  return out;
}

// Devices along each dimension's entry: how many blocks a spec cuts it into.
std::vector<int64_t> blocks_per_dim(const Mesh& mesh, const Spec& spec) {
  std::vector<int64_t> n;
  for (const AxisNames& entry : spec) {
    int64_t k = 1;
    for (const std::string& a : entry) k *= mesh.axis_size(a);
    n.push_back(k);
  }
  return n;
}

// A collective-permute of `block_bytes` per device, as XLA's partitioner
// moves blocks or halos between devices: over the devices at mesh positions
// `among` (empty: every device), spanning the axes along which they differ.
void record_permute(const Mesh& mesh, std::vector<int64_t> sent, std::vector<int64_t> received,
                    int64_t start, int64_t block_bytes, std::vector<int64_t> among = {}) {
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
bool record_retile_onto_new_axes(const Mesh& mesh, const Spec& from, const Spec& to, int64_t started,
                                 int64_t src_block_bytes) {
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
  if (!every_axis_used) {
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

// Which collective a reshard from `from` to `to` is: all-gather when axes
// only leave the spec, all-to-all when some move to another place.
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
  if (record_retile_onto_new_axes(mesh, from, to, started, src_block_bytes)) return;
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

}  // namespace

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

// ---- all-reduce of partial results -------------------------------------------------------

// The partial results of each group of devices along `axes`, all-reduced by
// the kernel of the collective declared to combine partials by `op`
// (Primitive::partials_reduction: psum/pmax/pmin, as in a shard_map body) and recorded
// with its ring bytes.
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

namespace {

// A whole value laid out as its type says (a view per distinct block).
ArrayPtr place(const Tensor& value, const Aval& aval) {
  if (!aval.mesh) return std::make_shared<Array>(aval, nullptr, std::vector<Tensor>{value});
  const Spec spec = pad_spec(aval.spec, aval.shape.size());
  if (is_replicated(spec) && aval.unreduced.empty()) {
    auto s = std::make_shared<Sharding>(sharding_of(aval.mesh, spec));
    return std::make_shared<Array>(aval, s, std::vector<Tensor>(aval.mesh->size(), value));
  }
  // A whole value typed unreduced starts its pending sums as reshard does: one
  // device along those axes holds it, the others zeros (the sum is the value).
  Aval whole_aval = aval;
  whole_aval.unreduced.clear();
  ArrayPtr whole = std::make_shared<Array>(whole_aval, nullptr, std::vector<Tensor>{value});
  return reshard_array(whole, aval.mesh, spec, aval);
}

bool sharded_type(const Aval& a) { return a.mesh && !is_replicated(a.spec); }

// The fallback: assemble, run on the whole value, split as the result's type says.
std::vector<ArrayPtr> run_whole(const Primitive& prim, const std::vector<ArrayPtr>& args,
                                const Avals& in, const Params& params, const Avals& out) {
  Tensors whole;
  for (size_t i = 0; i < args.size(); ++i) {
    const Sharding& s = *args[i]->sharding();
    if (s.mesh && !is_replicated(s.spec)) {
      AxisNames axes;
      for (const auto& e : s.spec) axes.insert(axes.end(), e.begin(), e.end());
      const int64_t total = static_cast<int64_t>(num_elements(in[i].shape) * itemsize(in[i].dtype));
      const int64_t local = static_cast<int64_t>(args[i]->shards()[0].nbytes());
      if (sharded_type(in[i])) record_collective(symmetric_collective("all_gather", *s.mesh, axes, total - local));
    }
    whole.push_back(args[i]->global());
  }
  Tensors res = run_primitive(prim, whole, params, out);
  std::vector<ArrayPtr> outs;
  for (size_t j = 0; j < res.size(); ++j) {
    if (!out[j].mesh) outs.push_back(Array::from_tensor(std::move(res[j]), out[j].weak_type));
    else outs.push_back(place(res[j], out[j]));
  }
  return outs;
}

// The all-reduces combining partial results over `axes`: XLA's partitioner
// all-reduces once per operand dim whose split is reduced or contracted (a
// sum over dims split over X and over Y is two all-reduces), a dim's axes
// together; axes no operand dim names (partial operands) form one more.
std::vector<AxisNames> reduction_groups(const std::vector<Spec>& operands, const AxisNames& axes) {
  std::vector<AxisNames> groups;
  std::set<std::string> left(axes.begin(), axes.end());
  for (const Spec& spec : operands)
    for (const AxisNames& entry : spec) {
      AxisNames group;
      for (const std::string& a : entry)
        if (left.erase(a)) group.push_back(a);
      if (!group.empty()) groups.push_back(std::move(group));
    }
  AxisNames rest;
  for (const std::string& a : axes)
    if (left.count(a)) rest.push_back(a);
  if (!rest.empty()) groups.push_back(std::move(rest));
  return groups;
}

// Per device, the part of `x` (laid out over `mesh`) that its windows read
// along one split dim (a LocalPlan's param `halo_window`: the dim, the low
// padding, the window): block i reads [i * window - low, (i + 1) * window - low)
// within the dim, its own elements and its neighbours'. The collective-permutes
// XLA moves those halos with (param `halo_permutes`: their sizes along the
// dim and the blocks taking part) are recorded; devices reading the same part
// share one buffer.
std::vector<Tensor> exchange_halos(const ArrayPtr& x, const MeshPtr& mesh, const Params& params) {
  const int64_t started = timeline::active() ? timeline::now_ns() : -1;
  const IntList& halo = params.get<IntList>("halo_window");
  const size_t dim = static_cast<size_t>(halo[0]);
  const int64_t low = halo[1], window = halo[2];
  const bool whole_windows = params.has("whole_windows");
  const Sharding& src = *x->sharding();
  const Shape& global = x->aval().shape;
  const Shape local = src.local_shape(global);
  const int64_t ndim = static_cast<int64_t>(global.size()), n = mesh->size();
  std::map<std::vector<int64_t>, Tensor> made;
  std::vector<Tensor> out(n);
  for (int64_t pos = 0; pos < n; ++pos) {
    const std::vector<int64_t> index = src.block_index(pos, ndim);
    auto it = made.find(index);
    if (it == made.end()) {
      Box want = block_box(src, pos, local);
      const int64_t start = index[dim] * window - low;
      want.lo[dim] = std::clamp<int64_t>(start, 0, global[dim]);
      want.hi[dim] = std::clamp<int64_t>(start + window, 0, global[dim]);
      Shape shape(ndim);
      for (int64_t d = 0; d < ndim; ++d) shape[d] = want.hi[d] - want.lo[d];
      // Param `whole_windows` (a slice over uneven blocks): every part is a whole
      // window, zeros past the dim's end (results there are cut off after).
      if (whole_windows) shape[dim] = window;
      Tensor part = whole_windows ? Tensor::zeros(x->aval().dtype, shape) : Tensor::empty(x->aval().dtype, shape);
      std::set<std::vector<int64_t>> copied;
      for (int64_t from = 0; from < n; ++from) {
        const Box have = block_box(src, from, local);
        const Box piece = intersect(want, have);
        if (piece.size() == 0 || !copied.insert(src.block_index(from, ndim)).second) continue;
        copy_into(view_of(x->shards()[from], have, piece), view_of(part, want, piece));
      }
      it = made.emplace(index, std::move(part)).first;
    }
    out[pos] = it->second;
  }
  const int64_t across = num_elements(local) / std::max<int64_t>(local[dim], 1) *
                         static_cast<int64_t>(itemsize(x->aval().dtype));
  // Each permute's devices: those whose block index along the dim is listed.
  const IntList& permutes = params.get<IntList>("halo_permutes");
  for (size_t k = 0; k + 1 < permutes.size(); k += 2 + permutes[k + 1]) {
    const int64_t bytes = permutes[k] * across;
    const IntList blocks(permutes.begin() + k + 2, permutes.begin() + k + 2 + permutes[k + 1]);
    std::vector<int64_t> among;
    for (int64_t pos = 0; pos < n; ++pos)
      if (in_list(blocks, src.block_index(pos, ndim)[dim])) among.push_back(pos);
    record_permute(*mesh, std::vector<int64_t>(n, bytes), std::vector<int64_t>(n, bytes), started, bytes,
                   std::move(among));
  }
  return out;
}

// Blocks of a dim that its axes do not divide (a LocalPlan's param
// `uneven_blocks`, the dim): each device's `per_device` block holds the
// dim's size rounded up to a multiple of the blocks, over `src`'s layout
// of the operand; XLA all-gathers them whole and cuts the padding off the
// end, leaving every device the dim's `size` elements.
void gather_uneven_blocks(std::vector<Tensor>& per_device, const Sharding& src, const MeshPtr& mesh,
                          size_t dim, int64_t size) {
  const int64_t started = timeline::active() ? timeline::now_ns() : -1;
  const int64_t n = mesh->size(), ndim = static_cast<int64_t>(per_device[0].ndim());
  const int64_t window = per_device[0].shape()[dim];
  std::map<std::vector<int64_t>, std::vector<int64_t>> along;  // other dims' block index -> holders by block
  for (int64_t pos = 0; pos < n; ++pos) {
    std::vector<int64_t> index = src.block_index(pos, ndim);
    const int64_t i = index[dim];
    index[dim] = 0;
    std::vector<int64_t>& holders = along[index];
    if (static_cast<int64_t>(holders.size()) <= i) holders.resize(i + 1, -1);
    if (holders[i] < 0) holders[i] = pos;
  }
  std::map<std::vector<int64_t>, Tensor> whole;
  std::vector<Tensor> out(n);
  for (int64_t pos = 0; pos < n; ++pos) {
    std::vector<int64_t> index = src.block_index(pos, ndim);
    index[dim] = 0;
    auto it = whole.find(index);
    if (it == whole.end()) {
      Shape shape = per_device[pos].shape();
      shape[dim] = size;
      Tensor t = Tensor::empty(per_device[pos].dtype(), shape);
      IntList lo(ndim, 0), hi = shape, step(ndim, 1);
      const std::vector<int64_t>& holders = along[index];
      for (size_t b = 0; b < holders.size(); ++b) {
        lo[dim] = std::min<int64_t>(static_cast<int64_t>(b) * window, size);
        hi[dim] = std::min<int64_t>(lo[dim] + window, size);
        if (hi[dim] == lo[dim]) continue;
        IntList from(ndim, 0), to = per_device[holders[b]].shape(), one(ndim, 1);
        to[dim] = hi[dim] - lo[dim];
        copy_into(per_device[holders[b]].slice(from, to, one), t.slice(lo, hi, step));
      }
      it = whole.emplace(index, std::move(t)).first;
    }
    out[pos] = it->second;
  }
  const int64_t blocks = static_cast<int64_t>(along.begin()->second.size());
  CollectiveRecord r = symmetric_collective("all_gather", *mesh, src.spec[dim],
                                            static_cast<int64_t>(per_device[0].nbytes()) * (blocks - 1));
  r.start_ns = started;
  record_collective(std::move(r));
  per_device = std::move(out);
}

std::vector<ArrayPtr> run_local(const Primitive& prim, const LocalPlan& plan,
                                const std::vector<ArrayPtr>& args, const Avals& in, const Avals& out,
                                const MeshPtr& mesh) {
  const int64_t n = mesh->size();
  std::vector<ArrayPtr> ins;
  for (size_t i = 0; i < args.size(); ++i) {
    Aval a = in[i];
    a.mesh = mesh;
    a.spec = explicit_part(plan.in_specs[i], *mesh, a.shape.size());
    ins.push_back(reshard_array(args[i], mesh, plan.in_specs[i], a));
  }
  // Each device's blocks of each operand: its own, or the window a halo exchange gives it.
  std::vector<std::vector<Tensor>> operand_blocks;
  for (const ArrayPtr& a : ins) operand_blocks.push_back(a->shards());
  if (plan.params.has("halo_window")) operand_blocks[0] = exchange_halos(ins[0], mesh, plan.params);
  // Devices holding the same input blocks compute once, unless the plan places each
  // device's block by its position (`index_blocks`: a gather or scatter over split indexed
  // dims reads the running device): blocks of a broadcast constant share one buffer
  // whatever their position, so equal buffers do not mean equal work there.
  const bool per_device = plan.params.has("index_blocks");
  std::map<std::vector<const void*>, int64_t> rep_id;
  std::vector<int64_t> rep_of(n), reps;
  for (int64_t pos = 0; pos < n; ++pos) {
    std::vector<const void*> key;
    if (per_device) key.push_back(reinterpret_cast<const void*>(static_cast<intptr_t>(pos) + 1));
    for (const std::vector<Tensor>& blocks : operand_blocks) key.push_back(blocks[pos].raw());
    auto [it, fresh] = rep_id.emplace(key, static_cast<int64_t>(reps.size()));
    if (fresh) reps.push_back(pos);
    rep_of[pos] = it->second;
  }
  Avals local = out;
  for (size_t j = 0; j < out.size(); ++j) {
    local[j].shape = sharding_of(mesh, plan.out_specs[j]).local_shape(out[j].shape);
    local[j].mesh = nullptr;
    local[j].spec.clear();
  }
  const int64_t uneven_dim = plan.params.get_or<int64_t>("uneven_blocks", -1);
  if (uneven_dim >= 0) local[0].shape[uneven_dim] = plan.params.get<IntList>("halo_window")[2];
  std::vector<Tensors> results(reps.size());
  {
    SingleThreadedBlas one_blas_thread;
    MeshContext ctx(*mesh);
    ctx.parallel_for(static_cast<int64_t>(reps.size()), [&](int64_t r) {
      timeline::DeviceScope on_device(mesh->device_ids[reps[r]]);
      Tensors blocks;
      for (const std::vector<Tensor>& per_device : operand_blocks) blocks.push_back(per_device[reps[r]]);
      results[r] = run_primitive(prim, blocks, plan.params, local);
    });
  }
  std::vector<ArrayPtr> outs;
  for (size_t j = 0; j < out.size(); ++j) {
    std::vector<Tensor> per_device(n);
    for (int64_t pos = 0; pos < n; ++pos) per_device[pos] = results[rep_of[pos]][j];
    if (j == 0 && uneven_dim >= 0)
      gather_uneven_blocks(per_device, *ins[0]->sharding(), mesh, static_cast<size_t>(uneven_dim),
                           out[0].shape[uneven_dim]);
    // Partial sums the result's type keeps unreduced stay as they are (no all-reduce).
    const AxisNames reduce_axes = without(plan.reduce_axes, out[j].unreduced);
    for (const AxisNames& group : reduction_groups(plan.in_specs, reduce_axes))
      all_reduce(*mesh, per_device, group, plan.reduce_op);
    const Spec natural = pad_spec(plan.out_specs[j], out[j].shape.size());
    Aval a = out[j];
    a.spec = explicit_part(natural, *mesh, a.shape.size());
    auto s = std::make_shared<Sharding>(sharding_of(mesh, natural));
    ArrayPtr arr = std::make_shared<Array>(a, s, std::move(per_device));
    const Spec typed = pad_spec(out[j].spec, out[j].shape.size());
    outs.push_back(natural == typed ? arr : reshard_array(arr, mesh, typed, out[j]));
  }
  return outs;
}

}  // namespace

std::vector<ArrayPtr> apply_primitive(const Primitive& prim, const std::vector<ArrayPtr>& args,
                                      const Avals& in, const Params& params, const Avals& out) {
  if (prim.array_kernel) return prim.array_kernel(args, params, out);
  bool sharded = false, partial = false;
  for (const Aval& a : in) {
    sharded |= sharded_type(a);
    partial |= !a.unreduced.empty();
  }
  for (const Aval& a : out) sharded |= sharded_type(a) || !a.unreduced.empty();
  if ((sharded || partial) && !out.empty() && out[0].mesh)
    if (std::optional<LocalPlan> plan = local_plan_for(prim, in, params, out))
      return run_local(prim, *plan, args, in, out, out[0].mesh);
  // An unreduced operand has no whole value to assemble.
  if (partial)
    fail<NotImplementedError>("meshsim runs ", prim.name, " on unreduced operands only on each "
                              "device's blocks, and it has no local plan for these types");
  return run_whole(prim, args, in, params, out);
}

}  // namespace meshsim
