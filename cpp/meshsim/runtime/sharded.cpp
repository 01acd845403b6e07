#include "meshsim/runtime/sharded.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/core/strided.h"
#include "meshsim/core/sub_axes.h"
#include "meshsim/ir/xla_instruction.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/runtime/sub_program_calls.h"
#include "meshsim/runtime/timeline.h"
#include "meshsim/sharding/rules.h"

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);
#include "meshsim/runtime/sharded_blocks.h"

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
  // Over sub-axes, it spans (part of) their axes.
  return {std::move(name), mesh.in_mesh_order(parent_axes(axes)), bytes, mesh.device_ids, std::move(groups),
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
  CollectiveRecord r{prim.name, mesh.in_mesh_order(parent_axes(t.axes)), 0, mesh.device_ids, std::move(t.groups),
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

using namespace sharded;

namespace {

// One BLAS thread per device task while devices run in parallel.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SingleThreadedBlas() { openblas_set_num_threads(saved_); }

 private:
  int saved_;
};

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
