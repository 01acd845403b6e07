#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/inlined_calls.h"
#include "meshsim/runtime/xla_rewrites.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "meshsim/core/cancel.h"
#include "meshsim/core/denormals.h"
#include "meshsim/core/sub_axes.h"

#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/runtime/scratch.h"
#include "meshsim/sharding/propagation.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/runtime/sharded.h"
#include "meshsim/runtime/sharded_blocks.h"
#include "meshsim/runtime/sub_program_calls.h"
#include "meshsim/runtime/timeline.h"

namespace meshsim {

namespace {

// The kernel run as a span of the device the current thread computes for,
// with its cost (only while a profiler session is open).
Tensors run_kernel_on_timeline(const Primitive& prim, const Tensors& args, const Params& params,
                               const Avals& out_avals) {
  const int64_t started = timeline::now_ns();
  Tensors out = prim.kernel(args, params, out_avals);
  TimelineEvent e;
  e.dur_ns = timeline::now_ns() - started;
  e.start_ns = started;
  e.name = prim.name;
  e.category = "op";
  e.device = timeline::current_device();
  Avals in;
  for (const Tensor& t : args) {
    in.emplace_back();
    in.back().shape = t.shape();
    in.back().dtype = t.dtype();
  }
  const Cost cost = cost_of(prim, in, params, out_avals);
  e.flops = cost.flops;
  e.bytes_accessed = cost.bytes_accessed;
  timeline::record(std::move(e));
  return out;
}

}  // namespace

Tensors run_primitive(const Primitive& prim, const Tensors& args, const Params& params,
                      const Avals& out_avals) {
  if (prim.passes_through || prim.layout_only) return args;
  if (!prim.kernel) {
    if (prim.is_collective())
      fail<NameError>("'", prim.name, "' must be called inside a shard_map body");
    fail<NotImplementedError>("primitive '", prim.name, "' has no kernel");
  }
  check_cancelled();  // every equation is a check point of an interrupted program
  const DenormalsFlushed as_xla_runs;  // see core/denormals.h
  Tensors out = timeline::active() ? run_kernel_on_timeline(prim, args, params, out_avals)
                                   : prim.kernel(args, params, out_avals);
  if (out.size() != out_avals.size())
    fail<std::logic_error>("kernel of '", prim.name, "' returned ", out.size(), " outputs, expected ",
                           out_avals.size());
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].shape() != out_avals[i].shape || out[i].dtype() != out_avals[i].dtype)
      fail<std::logic_error>("kernel of '", prim.name, "' returned ", dtype_name(out[i].dtype()),
                             shape_str(out[i].shape()), ", expected ", out_avals[i].str_short());
  return out;
}

std::vector<int> last_uses(const Program& program) {
  std::vector<int> last(program.avals.size(), -1);
  for (size_t k = 0; k < program.eqns.size(); ++k)
    for (int v : program.eqns[k].inputs) last[v] = static_cast<int>(k);
  for (int v : program.outvars) last[v] = static_cast<int>(program.eqns.size());
  return last;
}

Schedule::Schedule(const Program& program)
    : last(last_uses(program)), fusion(program, last), scalars(program, last) {
  const size_t n = program.eqns.size();
  out_avals.resize(n);
  moved.resize(n);
  freed.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const Equation& e = program.eqns[k];
    for (int v : e.outputs) out_avals[k].push_back(program.avals[v]);
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      // A value read for the last time (and not again by this equation) is moved.
      const int v = e.inputs[i];
      const bool final_read = last[v] == static_cast<int>(k);
      moved[k].push_back(final_read &&
                         std::find(e.inputs.begin() + i + 1, e.inputs.end(), v) == e.inputs.end());
      if (final_read && std::find(e.inputs.begin(), e.inputs.begin() + i, v) == e.inputs.begin() + i)
        freed[k].push_back(v);
    }
  }
}

namespace {

// A value worked out from one live program (not a new program at a freed
// one's address): programs are immutable once traced.
template <class T>
struct PerProgram {
  std::weak_ptr<Program> program;
  std::shared_ptr<T> value;
  bool holds(const ProgramPtr& p) const { return !program.owner_before(p) && !p.owner_before(program); }
};

// `make(*program)`, computed once per live program; `Tag` names the table.
// Made outside the lock, so that making one program's value may look up
// another's; when two threads make the same one, the first stored is kept.
template <class Tag, class T, class Make>
PerProgram<T> once_per_program(const ProgramPtr& program, Make make) {
  static std::mutex mutex;
  static std::unordered_map<const Program*, PerProgram<T>> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(program.get());
    if (it != cache.end() && it->second.holds(program)) return it->second;
  }
  PerProgram<T> made{program, make(*program)};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(program.get());
  if (it != cache.end() && it->second.holds(program)) return it->second;
  if (cache.size() >= 1024)
    for (auto i = cache.begin(); i != cache.end();)
      i = i->second.program.expired() ? cache.erase(i) : std::next(i);
  cache.insert_or_assign(program.get(), made);
  return made;
}

struct ScheduleTable;
struct RewriteTable;
struct InlineTable;

// once_per_program with a few entries per thread in front of the shared
// table: device tasks look their sub-programs up once per call (a loop's body
// once per iteration), and should not queue on one mutex for it.
template <class Tag, class T, class Make>
PerProgram<T> once_per_program_on_thread(const ProgramPtr& program, Make make) {
  constexpr size_t kLocal = 64;
  thread_local std::array<PerProgram<T>, kLocal> local;
  PerProgram<T>& slot = local[(reinterpret_cast<uintptr_t>(program.get()) >> 4) % kLocal];
  if (slot.program.expired() || !slot.holds(program)) slot = once_per_program<Tag, T>(program, make);
  return slot;
}

}  // namespace

std::shared_ptr<const Schedule> schedule_of(const ProgramPtr& program) {
  return once_per_program_on_thread<ScheduleTable, const Schedule>(
             program, [](const Program& p) { return std::make_shared<const Schedule>(p); })
      .value;
}

namespace {

Tensors run_scheduled(const Program& program, const Schedule& schedule, Tensors args) {
  if (args.size() != program.invars.size())
    fail<TypeError>("program expects ", program.invars.size(), " arguments, got ", args.size());
  ScratchFrame scratch(program.avals.size());
  std::vector<Tensor>& env = scratch.values();
  for (size_t i = 0; i < program.constvars.size(); ++i) env[program.constvars[i]] = program.consts[i];
  for (size_t i = 0; i < args.size(); ++i) env[program.invars[i]] = std::move(args[i]);

  Tensors& ins = scratch.operands();
  auto value = [&](int v) -> Tensor& { return env[v]; };
  auto one = [&](size_t k) {
    run_equation(program.eqns[k], schedule.out_avals[k], schedule.moved[k], schedule.freed[k], ins, value);
  };
  if ((!schedule.fusion.empty() || !schedule.scalars.empty()) && fusion_enabled()) {
    auto fused = [&](const FusedGroup& g) {
      const DenormalsFlushed as_xla_runs;  // as run_primitive (core/denormals.h)
      return run_fused(g, schedule.freed, value);
    };
    auto scalar = [&](const ScalarRun& r) { return run_scalar_run(r, schedule.freed, value); };
    for (size_t k = 0; k < program.eqns.size(); ++k) run_in_schedule(schedule, k, one, fused, scalar);
  } else {
    for (size_t k = 0; k < program.eqns.size(); ++k) one(k);
  }
  Tensors results;
  results.reserve(program.outvars.size());
  const std::vector<int>& out = program.outvars;
  for (auto it = out.begin(); it != out.end(); ++it)  // the last read of a variable takes it
    if (std::find(it + 1, out.end(), *it) == out.end()) results.push_back(std::move(env[*it]));
    else results.push_back(env[*it]);
  return results;
}

}  // namespace

Tensors run_program(const Program& program, const Tensors& args) {
  return run_scheduled(program, Schedule(program), args);
}

Tensors run_program(const ProgramPtr& program, Tensors args) {
  return run_scheduled(*program, *schedule_of(program), std::move(args));
}

namespace {

// Whether every value of `program` lives on one device and no primitive needs
// arrays: then it runs as one device's tensors, with no Array per equation.
bool single_device(const Program& program, const std::vector<ArrayPtr>& args) {
  for (const Aval& a : program.avals)
    if (a.mesh) return false;
  for (const ArrayPtr& x : args)
    if (!x->sharding()->is_single_device()) return false;
  for (const Equation& e : program.eqns)
    if (e.prim->array_kernel) return false;
  return true;
}

// Whether the program multiplies matrices, all of them small (every operand
// and result of at most 2^16 elements): OpenBLAS's threads then cost more than
// they save. (It splits a product's rows and columns, never a dot product, so
// the result does not depend on its thread count.)
bool small_products(const Program& program) {
  bool any = false;
  for (const Equation& e : program.eqns) {
    if (!e.prim->uses_blas) continue;
    any = true;
    for (const std::vector<int>* vars : {&e.inputs, &e.outputs})
      for (int v : *vars)
        if (num_elements(program.avals[v].shape) > (int64_t{1} << 16)) return false;
  }
  return any;
}

// Every variable's array, for a run over global arrays: the constants and
// the arguments to begin with.
std::vector<ArrayPtr> initial_env(const Program& program, const std::vector<ArrayPtr>& args) {
  std::vector<ArrayPtr> env(program.avals.size());
  for (size_t i = 0; i < program.constvars.size(); ++i)
    env[program.constvars[i]] =
        Array::from_tensor(program.consts[i], program.avals[program.constvars[i]].weak_type);
  for (size_t i = 0; i < args.size(); ++i) env[program.invars[i]] = args[i];
  return env;
}

// The layouts propagation chooses for `program` on `mesh` given its
// arguments' layouts, computed once per distinct layouts.
std::shared_ptr<const ShardingPlan> plan_for(const Program& program, const Mesh& mesh,
                                             const std::vector<ArrayPtr>& args) {
  std::vector<std::optional<Spec>> specs;
  std::string key;
  for (const ArrayPtr& x : args) {
    const Sharding& s = *x->sharding();
    if (s.mesh && same_devices(*s.mesh, mesh)) specs.push_back(pad_spec(s.spec, x->aval().shape.size()));
    else specs.push_back(std::nullopt);
    key += specs.back() ? spec_repr(*specs.back()) : "-";
    key += ';';
  }
  ShardingPlanCache& cache = program.sharding_plans;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.plans.find(key);
    if (it != cache.plans.end()) return it->second;
  }
  auto plan = std::make_shared<const ShardingPlan>(propagate_shardings(program, mesh, specs));
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.plans.emplace(key, plan).first->second;
}

// `x` typed `aval` (the program's type: the Auto axes of its layout are not
// part of it); its spec without trailing unsharded dimensions, as XLA gives it.
ArrayPtr retyped(const ArrayPtr& x, const Aval& aval) {
  ShardingPtr s = x->sharding();
  if (!s->spec.empty() && s->spec.back().empty()) {
    auto trimmed = std::make_shared<Sharding>(*s);
    while (!trimmed->spec.empty() && trimmed->spec.back().empty()) trimmed->spec.pop_back();
    s = std::move(trimmed);
  }
  return std::make_shared<Array>(aval, std::move(s), x->shards());
}

// `x` moved to the layout the plan gives the operand it is used as (`use`):
// the collectives XLA inserts there are counted, a replicated use included
// (the kernels' own fallback gathers operands typed replicated silently).
ArrayPtr moved_to(const ArrayPtr& x, const Aval& use) {
  const Sharding& s = *x->sharding();
  const size_t ndim = use.shape.size();
  if (!s.mesh || !same_devices(*s.mesh, *use.mesh) || !x->aval().unreduced.empty()) return x;
  if (pad_spec(s.spec, ndim) == use.spec) return x;
  Aval typed = x->aval();
  typed.mesh = use.mesh;
  typed.spec = explicit_part(use.spec, *use.mesh, ndim);
  return reshard_array(x, use.mesh, use.spec, typed);
}

// A collective-permute of `block_bytes` per device over every device, as
// XLA's partitioner moves whole blocks (those keeping theirs send to themselves).
void record_block_permute(const Mesh& mesh, int64_t block_bytes, int64_t started) {
  AxisNames spanned;
  for (const std::string& a : mesh.axis_names)
    if (mesh.axis_size(a) > 1) spanned.push_back(a);
  std::vector<std::vector<int64_t>> everyone(1);
  for (int64_t pos = 0; pos < mesh.size(); ++pos) everyone[0].push_back(pos);
  CollectiveRecord permute = symmetric_collective("ppermute", mesh, spanned, block_bytes, std::move(everyone));
  permute.steps = 1;
  permute.start_ns = started;
  record_collective(std::move(permute));
}

// The layout XLA's partitioner passes a contraction's operand through when
// it gathers it whole along mesh axes that also split the contraction's
// other operand or result: it groups the devices by those axes and, rather
// than gathering across the groups, cuts each device's block into the
// pieces the devices within its group hold when the dim is split over the
// axes nothing in the contraction uses, moves those pieces there with one
// collective-permute and gathers them within the group (with the operand's
// other dims the use leaves whole, minor dim first), or computes on them
// (propagation's split_over_idle_axes gave the dim the idle axes). `have`:
// the operand's layout; `want`: its use (`have` with the shared axes of one
// dim dropped, or replaced by the idle ones, and other dims' axes dropped
// from the end); `around`: the layouts of the other operands and the
// results. The layout the pieces move to, or nullopt when the operand moves
// otherwise (a plain all-gather).
std::optional<Spec> gathered_through_idle_axes(const Mesh& mesh, const Spec& have, const Spec& want,
                                               const std::vector<Spec>& around, const Shape& shape) {
  if (have.size() != want.size()) return std::nullopt;
  std::set<std::string> used;
  for (const Spec& spec : around)
    for (const AxisNames& e : spec) used.insert(e.begin(), e.end());
  // The one dim holding axes the other values use; the others the use changes
  // only gather, or, unsplit, take some of that dim's axes.
  size_t dim = have.size();
  size_t differing = 0;
  std::vector<size_t> gaining;
  for (size_t d = 0; d < have.size(); ++d) {
    if (have[d] == want[d]) continue;
    ++differing;
    if (std::any_of(have[d].begin(), have[d].end(), [&](const std::string& a) { return used.count(a) > 0; })) {
      if (dim != have.size()) return std::nullopt;
      dim = d;
    } else if (have[d].empty()) {
      gaining.push_back(d);
    } else if (want[d].size() > have[d].size() || !std::equal(want[d].begin(), want[d].end(), have[d].begin())) {
      return std::nullopt;
    }
  }
  if (dim == have.size()) return std::nullopt;
  for (size_t d : gaining)
    for (const std::string& a : want[d])
      if (!std::count(have[dim].begin(), have[dim].end(), a)) return std::nullopt;
  int64_t gathered = 1;
  for (const std::string& a : have[dim]) gathered *= mesh.axis_size(a);
  for (const AxisNames& e : have) used.insert(e.begin(), e.end());
  for (size_t d = 0; d < want.size(); ++d)
    if (d != dim) used.insert(want[d].begin(), want[d].end());
  // Axes the operand is used cut along (the other operands are cut alike) count as idle.
  for (const std::string& a : want[dim])
    if (!std::count(have[dim].begin(), have[dim].end(), a)) used.erase(a);
  AxisNames idle;
  int64_t within = 1;
  for (const std::string& a : mesh.axis_names)
    if (!used.count(a) && mesh.axis_size(a) > 1) {
      idle.push_back(a);
      within *= mesh.axis_size(a);
    }
  // Where the shared axes move to other dims (a batch dim, as XLA's partitioner
  // re-tiles an operand to the batch blocks), the dim keeps its block count,
  // over the major idle (sub-)axes; elsewhere no more pieces than the dim has.
  const int64_t pieces = !gaining.empty() ? gathered : std::min(within, shape[dim]);
  if (pieces > 1 && pieces < within) {
    AxisNames major;
    int64_t n = 1;
    for (const std::string& a : idle) {
      const int64_t k = mesh.axis_size(a);
      if (n * k <= pieces) {
        major.push_back(a);
        n *= k;
      } else if (pieces % n == 0 && k % (pieces / n) == 0 && pieces / n > 1) {
        major.push_back(axis_part_name(mesh, {a, 1, pieces / n}));
        n = pieces;
      }
      if (n == pieces) break;
    }
    if (n != pieces) return std::nullopt;
    idle = std::move(major);
    within = pieces;
  }
  if (idle.empty() || within < gathered || within % gathered != 0 || shape[dim] % within != 0)
    return std::nullopt;
  if (want[dim] == idle && differing == 1) return want;  // computed on the pieces (sharding/propagation_contraction.cpp split_over_idle_axes)
  if (!want[dim].empty()) return std::nullopt;
  Spec staged = have;
  staged[dim] = idle;
  for (size_t d : gaining) staged[d] = want[d];
  return staged;
}

// x laid out as `use` by cutting its blocks from the whole value: moves nothing
// further (the collectives that bring the blocks are recorded by the caller).
ArrayPtr cut_from_whole(const ArrayPtr& x, const Aval& use) {
  Aval typed = x->aval();
  typed.mesh = use.mesh;
  typed.spec = explicit_part(use.spec, *use.mesh, use.shape.size());
  return reshard_array(Array::from_tensor(x->global(), typed.weak_type), use.mesh, use.spec, typed);
}

// `x` moved to `use` through the layout `staged` (gathered_through_idle_axes):
// the collective-permute of the pieces, and the all-gather within the groups
// when `use` is not `staged`, are recorded; the blocks are cut from the whole value.
ArrayPtr gathered_through(const ArrayPtr& x, const Aval& use, const Spec& staged) {
  const Mesh& mesh = *use.mesh;
  Sharding pieces;
  pieces.mesh = use.mesh;
  pieces.spec = staged;
  const Shape piece_shape = pieces.local_shape(use.shape);
  int64_t bytes = static_cast<int64_t>(itemsize(use.dtype));
  for (int64_t n : piece_shape) bytes *= n;
  const int64_t started = timeline::active() ? timeline::now_ns() : -1;
  record_block_permute(mesh, bytes, started);
  // Within the groups, one all-gather per dim, the minor dim first.
  for (size_t d = use.shape.size(); d-- > 0;) {
    if (staged[d] == use.spec[d]) continue;
    const AxisNames within(staged[d].begin() + static_cast<std::ptrdiff_t>(use.spec[d].size()), staged[d].end());
    const int64_t group = entry_size(mesh, within);
    if (group < 2) continue;
    CollectiveRecord gather = symmetric_collective("all_gather", mesh, within, bytes * (group - 1));
    gather.start_ns = started;
    record_collective(std::move(gather));
    bytes *= group;
  }
  return cut_from_whole(x, use);
}

// The axes XLA's partitioner brings onto a contraction's operand when it
// re-tiles it for the contraction: one split dim takes further (minor) axes the
// operand does not use ("arriving") while another dim gives up as many
// devices' worth of its minor axes (`P('Y', 'Z')` used as `P(('Y', 'X'))` on
// 2x2x2). XLA first permutes the blocks so the arriving axes stand where the
// leaving ones stood (the operand is replicated along them, so every device
// can take the block it will need), then runs an all-to-all over the arriving
// axes; a plain reshard (record_reshard) runs the all-to-all over the leaving
// axes and permutes after. nullopt when the use is not such a re-tile.
std::optional<AxisNames> arriving_through_permute(const Mesh& mesh, const Spec& have, const Spec& want) {
  if (have.size() != want.size()) return std::nullopt;
  size_t gaining = have.size(), losing = have.size();
  for (size_t d = 0; d < have.size(); ++d) {
    if (have[d] == want[d]) continue;
    if (!have[d].empty() && want[d].size() > have[d].size() && std::equal(have[d].begin(), have[d].end(), want[d].begin()) &&
        gaining == have.size())
      gaining = d;
    else if (want[d].size() < have[d].size() && std::equal(want[d].begin(), want[d].end(), have[d].begin()) &&
             losing == have.size())
      losing = d;
    else
      return std::nullopt;
  }
  if (gaining == have.size() || losing == have.size()) return std::nullopt;
  std::set<std::string> held;
  for (const AxisNames& e : have) held.insert(e.begin(), e.end());
  const AxisNames arriving(want[gaining].begin() + static_cast<std::ptrdiff_t>(have[gaining].size()),
                           want[gaining].end());
  const AxisNames leaving(have[losing].begin() + static_cast<std::ptrdiff_t>(want[losing].size()),
                          have[losing].end());
  for (const std::string& a : arriving)
    if (held.count(a) || is_sub_axis(a)) return std::nullopt;
  for (const std::string& a : leaving)
    if (is_sub_axis(a)) return std::nullopt;
  if (entry_size(mesh, arriving) != entry_size(mesh, leaving)) return std::nullopt;
  return arriving;
}

// `x` moved to `use` as arriving_through_permute says: the collective-permute
// of whole blocks, then the all-to-all over the arriving axes, are recorded;
// the blocks are cut from the whole value.
ArrayPtr retiled_through_permute(const ArrayPtr& x, const Aval& use, const AxisNames& arriving) {
  const Mesh& mesh = *use.mesh;
  const Shape block = x->sharding()->local_shape(use.shape);
  int64_t block_bytes = static_cast<int64_t>(itemsize(use.dtype));
  for (int64_t n : block) block_bytes *= n;
  const int64_t started = timeline::active() ? timeline::now_ns() : -1;
  record_block_permute(mesh, block_bytes, started);
  const int64_t n = entry_size(mesh, arriving);
  CollectiveRecord all_to_all = symmetric_collective("all_to_all", mesh, arriving, block_bytes * (n - 1) / n);
  all_to_all.start_ns = started;
  record_collective(std::move(all_to_all));
  return cut_from_whole(x, use);
}

// Whether a batched contraction's operand laid out as `have` is used as
// `want` by moving one dim's axes onto an unsplit batch dim (of `batch`)
// together with axes the operand does not use, every mesh axis used by the
// use or by `around` (the other operands' uses and the results):
// `P(None, 'Y', None)` used as `P(('Y', 'X'), None, None)` against an operand
// `P(('Y', 'X'), None, 'Z')` on 2x2x2. XLA's partitioner groups the devices by
// the batch blocks and re-tiles the operand with a local slice over the new
// axes, an all-to-all over the moving ones and a collective-permute where the
// use orders them otherwise, though the use leaves Z unused (a reshard
// elsewhere gathers Y there).
bool retiles_onto_batch_dim(const Mesh& mesh, const Spec& have, const Spec& want, const IntList& batch,
                            const std::vector<Spec>& around) {
  if (have.size() != want.size()) return false;
  size_t gaining = have.size();
  for (size_t d = 0; d < have.size(); ++d)
    if (have[d].empty() && !want[d].empty()) gaining = d;
  if (gaining == have.size() || std::find(batch.begin(), batch.end(), static_cast<int64_t>(gaining)) == batch.end())
    return false;
  std::set<std::string> used;
  for (const Spec& spec : around)
    for (const AxisNames& e : spec) used.insert(e.begin(), e.end());
  for (const AxisNames& e : want) used.insert(e.begin(), e.end());
  for (const std::string& a : mesh.axis_names)
    if (mesh.axis_size(a) > 1 && !used.count(a)) return false;
  return true;
}

// `x` moved to `use` as retiles_onto_batch_dim says, the collectives recorded
// as record_retile_onto_new_axes records them; nullptr (nothing recorded) when
// the use is not such a re-tile.
ArrayPtr retiled_onto_batch_dim(const ArrayPtr& x, const Aval& use) {
  const Mesh& mesh = *use.mesh;
  const Shape block = x->sharding()->local_shape(use.shape);
  int64_t block_bytes = static_cast<int64_t>(itemsize(use.dtype));
  for (int64_t n : block) block_bytes *= n;
  const int64_t started = timeline::active() ? timeline::now_ns() : -1;
  if (!sharded::record_retile_onto_new_axes(mesh, pad_spec(x->sharding()->spec, use.shape.size()), use.spec,
                                            started, block_bytes, /*all_to_all_only=*/true))
    return nullptr;
  return cut_from_whole(x, use);
}

// Whether a value laid out as `from` becomes laid out as `to` by local slices
// alone: every dim keeps its axes and may add ones `from` does not use.
bool slices_to(const Spec& from, const Spec& to) {
  std::set<std::string> used;
  for (const AxisNames& e : from) used.insert(e.begin(), e.end());
  for (size_t d = 0; d < to.size(); ++d) {
    const AxisNames none;
    const AxisNames& f = d < from.size() ? from[d] : none;
    if (f.size() > to[d].size() || !std::equal(f.begin(), f.end(), to[d].begin())) return false;
    for (size_t k = f.size(); k < to[d].size(); ++k)
      if (used.count(to[d][k])) return false;
  }
  for (size_t d = to.size(); d < from.size(); ++d)
    if (!from[d].empty()) return false;
  return true;
}

std::vector<ArrayPtr> run_with_plan(const Program& program, const std::vector<ArrayPtr>& args,
                                    const MeshPtr& mesh, const std::shared_ptr<const ShardingPlan>& plan);

// `value`'s type laid out over `mesh` as `spec` (its Explicit axes in the type).
Aval laid_out_over(Aval value, const MeshPtr& mesh, const Spec& spec) {
  const size_t ndim = value.shape.size();
  value.mesh = mesh;
  value.spec = explicit_part(pad_spec(spec, ndim), *mesh, ndim);
  return value;
}

// The global array whose block on the device at mesh position `pos` is `blocks[pos]`.
ArrayPtr from_blocks(const Aval& type, const MeshPtr& mesh, const Spec& spec, std::vector<Tensor> blocks) {
  auto s = std::make_shared<Sharding>();
  s->mesh = mesh;
  s->spec = pad_spec(spec, type.shape.size());
  return std::make_shared<Array>(laid_out_over(type, mesh, spec), std::move(s), std::move(blocks));
}

// XLA's program text holds every sub-program of a control-flow equation, so
// its collectives count whether or not a call ran it (a cond's branch no
// device took, a loop body run no time): each sub-program in `calls` that is
// not `called` runs once on the operands it receives (`in[pos]`: every
// device's operands), its results discarded, as a loop body's first call
// is recorded. Sub-programs with effects, or reading one row of a stacked
// operand, are left.
void run_uncalled_once(const Equation& e, const std::vector<Tensors>& in,
                       const std::map<const Program*, SubProgramCall>& calls,
                       const std::set<const Program*>& called) {
  const std::optional<ControlFlowLinks> links = sub_program_links(*e.prim, e.params);
  if (!links) return;
  for (const SubProgramLinks& l : links->programs) {
    const auto call = calls.find(l.program.get());
    if (call == calls.end() || called.count(l.program.get())) continue;
    bool runs = l.in_operand.size() == l.program->invars.size();
    for (int o : l.in_operand) runs = runs && o >= 0 && static_cast<size_t>(o) < links->stacked_operands;
    for (const Equation& q : l.program->eqns) runs = runs && !q.prim->has_effects;
    if (!runs) continue;
    std::vector<Tensors> operands(in.size());
    for (size_t pos = 0; pos < in.size(); ++pos)
      for (int o : l.in_operand) operands[pos].push_back(in[pos][o]);
    call->second(std::move(operands));
  }
}

// A control-flow equation whose sub-programs run partitioned (the plan's
// `sub`): its own loop runs over every device's blocks (`mesh_call`), and
// each sub-program call runs partitioned on global arrays, its inputs
// arriving and its outputs leaving in the layouts the plan gives them.
// Collectives inside are recorded once per sub-program, as XLA's program
// text holds a loop body's once.
std::vector<ArrayPtr> run_call_partitioned(const Equation& e, const std::vector<ArrayPtr>& args,
                                           const Avals& outs, const MeshPtr& mesh,
                                           const std::vector<SubProgramPlan>& subs) {
  const int64_t n = mesh->size();
  SubProgramRecords records;
  std::map<const Program*, SubProgramCall> calls;
  std::mutex called_mutex;
  std::set<const Program*> called;
  for (const SubProgramPlan& sp : subs) {
    calls[sp.program.get()] = [&records, &sp, &mesh, n, &called, &called_mutex](std::vector<Tensors> in) {
      {
        std::lock_guard<std::mutex> lock(called_mutex);
        called.insert(sp.program.get());
      }
      records.begin_call(sp.program.get(), sp.copies);
      const Program& p = *sp.program;
      std::vector<ArrayPtr> arrays;
      for (size_t i = 0; i < p.invars.size(); ++i) {
        std::vector<Tensor> blocks(n);
        for (int64_t pos = 0; pos < n; ++pos) blocks[pos] = std::move(in[pos][i]);
        arrays.push_back(from_blocks(p.avals[p.invars[i]], mesh, sp.in[i], std::move(blocks)));
      }
      const std::vector<ArrayPtr> res = run_with_plan(p, arrays, mesh, sp.plan);
      std::vector<Tensors> out(n);
      for (size_t j = 0; j < res.size(); ++j) {
        Aval use = p.avals[p.outvars[j]];
        use.mesh = mesh;
        use.spec = pad_spec(sp.out[j], use.shape.size());
        const ArrayPtr blocks = moved_to(res[j], use);
        for (int64_t pos = 0; pos < n; ++pos) out[pos].push_back(blocks->shards()[pos]);
      }
      return out;
    };
  }
  PartitionedSubPrograms partitioned(calls);
  std::vector<Tensors> in(n);
  for (const ArrayPtr& a : args) {
    // An array off the mesh (a literal) is every device's block.
    const bool whole = !a->sharding()->mesh;
    for (int64_t pos = 0; pos < n; ++pos) in[pos].push_back(whole ? a->global() : a->shards()[pos]);
  }
  Avals local = outs;
  for (Aval& a : local) {
    Sharding blocks;
    blocks.mesh = mesh;
    blocks.spec = a.spec;
    a.shape = blocks.local_shape(a.shape);
    a.mesh = nullptr;
    a.spec.clear();
  }
  MeshContext ctx(*mesh);
  std::vector<Tensors> res = e.prim->mesh_call(ctx, in, e.params, local);
  run_uncalled_once(e, in, calls, called);
  std::vector<ArrayPtr> results;
  for (size_t j = 0; j < outs.size(); ++j) {
    std::vector<Tensor> blocks(n);
    for (int64_t pos = 0; pos < n; ++pos) blocks[pos] = std::move(res[pos][j]);
    results.push_back(from_blocks(outs[j], mesh, outs[j].spec, std::move(blocks)));
  }
  return results;
}

// A program over a mesh with Auto axes, partitioned as propagation says:
// every equation computes on its operands laid out as the plan says (moving
// what must move), and its results are laid out as their values' layouts.
std::vector<ArrayPtr> run_partitioned(const Program& program, const std::vector<ArrayPtr>& args,
                                      const MeshPtr& mesh) {
  std::vector<ArrayPtr> results = run_with_plan(program, args, mesh, plan_for(program, *mesh, args));
  // A result laid out over sub-axes leaves with each dim's axes up to its
  // first sub-axis (no sharding names one): gathered over the rest, the minor
  // dim first, as in XLA's program.
  for (size_t j = 0; j < results.size(); ++j) {
    const ShardingPtr s = results[j]->sharding();
    if (!s->mesh || !same_devices(*s->mesh, *mesh)) continue;
    Spec named = s->spec;
    for (AxisNames& entry : named)
      entry.erase(std::find_if(entry.begin(), entry.end(), is_sub_axis), entry.end());
    if (named == s->spec) continue;
    Aval use = program.avals[program.outvars[j]];
    use.mesh = mesh;
    use.spec = pad_spec(named, use.shape.size());
    results[j] = retyped(moved_to(results[j], use), program.avals[program.outvars[j]]);
  }
  return results;
}

// A contraction's operand moved to a finer layout (each new block within one
// old block) that lists some dim's axes other than in mesh order
// (`P(None, None, ('Y', 'X'))` used as `P('X', None, ('Z', 'Y'))`): XLA's
// partitioner permutes the blocks first to the layout with each dim's axes in
// mesh order, then to the use's order; the same reshard outside a contraction
// is one permute. The layout in mesh order, or nullopt when the use is not such
// a move.
std::optional<Spec> permuted_through_mesh_order(const Mesh& mesh, const Spec& have, const Spec& want) {
  if (have.size() != want.size() || slices_to(have, want)) return std::nullopt;
  Spec ordered = want;
  for (size_t d = 0; d < want.size(); ++d) {
    for (const std::string& a : want[d])
      if (is_sub_axis(a)) return std::nullopt;
    for (const std::string& a : have[d])
      if (is_sub_axis(a)) return std::nullopt;
    if (entry_size(mesh, want[d]) % entry_size(mesh, have[d]) != 0) return std::nullopt;
    std::sort(ordered[d].begin(), ordered[d].end(), [&](const std::string& a, const std::string& b) {
      return std::find(mesh.axis_names.begin(), mesh.axis_names.end(), a) <
             std::find(mesh.axis_names.begin(), mesh.axis_names.end(), b);
    });
  }
  if (ordered == want || ordered == have) return std::nullopt;
  return ordered;
}

// `x` moved to `use` through the layout `ordered` (permuted_through_mesh_order):
// the two collective-permutes of the use's blocks are recorded; the blocks are
// cut from the whole value.
ArrayPtr permuted_through(const ArrayPtr& x, const Aval& use) {
  const Mesh& mesh = *use.mesh;
  Sharding target;
  target.mesh = use.mesh;
  target.spec = use.spec;
  int64_t block_bytes = static_cast<int64_t>(itemsize(use.dtype));
  for (int64_t n : target.local_shape(use.shape)) block_bytes *= n;
  const int64_t started = timeline::active() ? timeline::now_ns() : -1;
  for (int step = 0; step < 2; ++step) record_block_permute(mesh, block_bytes, started);
  return cut_from_whole(x, use);
}

std::vector<ArrayPtr> run_with_plan(const Program& program, const std::vector<ArrayPtr>& args,
                                    const MeshPtr& mesh, const std::shared_ptr<const ShardingPlan>& plan) {
  std::vector<ArrayPtr> env = initial_env(program, args);
  // Results computed with more of their dims whole than their layouts (the
  // plan's `computed`): uses laid out with fewer axes slice these.
  std::vector<ArrayPtr> fuller(program.avals.size());
  const std::vector<int> last = last_uses(program);
  auto laid_out = [&](int v, const Spec& spec) {
    Aval a = program.avals[v];
    a.mesh = mesh;
    a.spec = pad_spec(spec, a.shape.size());
    return a;
  };
  // Equations whose results nothing reads are not run (XLA removes them too,
  // with the collectives they would have needed).
  std::vector<bool> live(program.avals.size(), false), run(program.eqns.size(), false);
  for (int v : program.outvars) live[v] = true;
  for (size_t k = program.eqns.size(); k-- > 0;) {
    const Equation& e = program.eqns[k];
    run[k] = e.outputs.empty();  // effects only (debug_callback)
    for (int v : e.outputs) run[k] = run[k] || live[v];
    if (run[k])
      for (int v : e.inputs) live[v] = true;
  }
  // All-reduces are combined as XLA combines them: one waits for the held
  // ones only when its operand depends on one of them.
  AllReduceCombiner combiner;
  std::vector<bool> after_held(program.avals.size(), false);
  std::vector<ArrayPtr> arrays;
  Avals ins, outs;
  for (size_t k = 0; k < program.eqns.size(); ++k) {
    const Equation& e = program.eqns[k];
    if (!run[k]) {
      for (int v : e.inputs)
        if (last[v] == static_cast<int>(k)) env[v] = nullptr;
      continue;
    }
    arrays.clear();
    ins.clear();
    outs.clear();
    const bool own_layout = static_cast<bool>(e.prim->array_kernel);
    const std::vector<Spec>& computed = plan->computed[k];
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const int v = e.inputs[i];
      ins.push_back(own_layout ? program.avals[v] : laid_out(v, plan->operand[k][i]));
      const bool from_fuller = !own_layout && fuller[v] && slices_to(fuller[v]->sharding()->spec, ins.back().spec);
      std::optional<Spec> staged;
      if (e.prim->name == "dot_general" && !own_layout && !from_fuller && env[v]->sharding()->mesh &&
          same_devices(*env[v]->sharding()->mesh, *mesh) && env[v]->aval().unreduced.empty()) {
        std::vector<Spec> around;
        for (size_t o = 0; o < e.inputs.size(); ++o)
          if (o != i) around.push_back(plan->operand[k][o]);
        for (size_t j = 0; j < e.outputs.size(); ++j)
          around.push_back(computed.empty() ? plan->value[e.outputs[j]] : computed[j]);
        staged = gathered_through_idle_axes(*mesh, pad_spec(env[v]->sharding()->spec, ins.back().shape.size()),
                                            ins.back().spec, around, ins.back().shape);
      }
      std::optional<AxisNames> arriving;
      if (e.prim->name == "dot_general" && !own_layout && !from_fuller && !staged && env[v]->sharding()->mesh &&
          same_devices(*env[v]->sharding()->mesh, *mesh) && env[v]->aval().unreduced.empty())
        arriving = arriving_through_permute(*mesh, pad_spec(env[v]->sharding()->spec, ins.back().shape.size()),
                                            ins.back().spec);
      std::optional<Spec> ordered;
      if (e.prim->name == "dot_general" && !own_layout && !from_fuller && !staged && !arriving &&
          env[v]->sharding()->mesh && same_devices(*env[v]->sharding()->mesh, *mesh) &&
          env[v]->aval().unreduced.empty())
        ordered = permuted_through_mesh_order(*mesh, pad_spec(env[v]->sharding()->spec, ins.back().shape.size()),
                                              ins.back().spec);
      ArrayPtr onto_batch;
      if (e.prim->name == "dot_general" && !own_layout && !from_fuller && !staged && !arriving && !ordered &&
          env[v]->sharding()->mesh && same_devices(*env[v]->sharding()->mesh, *mesh) &&
          env[v]->aval().unreduced.empty()) {
        const IntLists& dims = e.params.get<IntLists>("dimension_numbers");  // lc, rc, lb, rb
        std::vector<Spec> around;
        for (size_t o = 0; o < e.inputs.size(); ++o)
          if (o != i) around.push_back(plan->operand[k][o]);
        for (size_t j = 0; j < e.outputs.size(); ++j)
          around.push_back(computed.empty() ? plan->value[e.outputs[j]] : computed[j]);
        if (dims.size() == 4 && i < 2 &&
            retiles_onto_batch_dim(*mesh, pad_spec(env[v]->sharding()->spec, ins.back().shape.size()),
                                   ins.back().spec, dims[2 + i], around))
          onto_batch = retiled_onto_batch_dim(env[v], ins.back());
      }
      if (staged) arrays.push_back(gathered_through(env[v], ins.back(), *staged));
      else if (arriving) arrays.push_back(retiled_through_permute(env[v], ins.back(), *arriving));
      else if (ordered) arrays.push_back(permuted_through(env[v], ins.back()));
      else if (onto_batch) arrays.push_back(std::move(onto_batch));
      else arrays.push_back(own_layout ? env[v] : moved_to(from_fuller ? fuller[v] : env[v], ins.back()));
    }
    for (size_t j = 0; j < e.outputs.size(); ++j) {
      const int v = e.outputs[j];
      outs.push_back(own_layout ? program.avals[v] : laid_out(v, computed.empty() ? plan->value[v] : computed[j]));
    }
    bool dependent = false;
    for (int v : e.inputs) dependent = dependent || after_held[v];
    combiner.set_dependent(dependent);
    const int64_t holds = combiner.holds(), flushes = combiner.flushes();
    std::vector<ArrayPtr> res = plan->sub[k].empty() ? apply_primitive(*e.prim, arrays, ins, e.params, outs)
                                                     : run_call_partitioned(e, arrays, outs, mesh, plan->sub[k]);
    if (combiner.flushes() != flushes) std::fill(after_held.begin(), after_held.end(), false);
    const bool waits = combiner.holds() != holds || (dependent && combiner.flushes() == flushes);
    for (size_t i = 0; i < res.size(); ++i) {
      const int v = e.outputs[i];
      if (!own_layout && !computed.empty()) {
        fuller[v] = res[i];
        res[i] = moved_to(res[i], laid_out(v, plan->value[v]));  // local slices
      }
      env[v] = own_layout ? std::move(res[i]) : retyped(res[i], program.avals[v]);
      after_held[v] = waits;
    }
    for (int v : e.inputs)
      if (last[v] == static_cast<int>(k)) env[v] = fuller[v] = nullptr;
  }
  std::vector<ArrayPtr> results;
  for (int v : program.outvars) results.push_back(env[v]);
  return results;
}

}  // namespace

namespace {

// The program run for `traced`: it as XLA compiles it, its nested calls inlined
// (runtime/inlined_calls.h) and rewritten (runtime/xla_rewrites.h), once per
// traced program rather than per call, reshapes of reshapes folded. `rewrite`:
// also the bit-visible rewrites.
ProgramPtr as_run(const ProgramPtr& traced, bool rewrite = true) {
  auto compile = [rewrite](const Program& p) -> std::shared_ptr<Program> {
    std::optional<Program> inlined = with_calls_inlined(p);
    if (std::optional<Program> folded = with_reshapes_folded(inlined ? *inlined : p)) inlined = std::move(folded);
    std::optional<Program> r = rewrite ? as_xla_compiles(inlined ? *inlined : p) : std::nullopt;
    if (r) return std::make_shared<Program>(std::move(*r));
    return inlined ? std::make_shared<Program>(std::move(*inlined)) : nullptr;
  };
  const PerProgram<Program> compiled = rewrite ? once_per_program_on_thread<RewriteTable, Program>(traced, compile)
                                               : once_per_program_on_thread<InlineTable, Program>(traced, compile);
  return compiled.value ? compiled.value : traced;
}

}  // namespace

ProgramPtr as_xla_compiles_within(const ProgramPtr& traced) { return as_run(traced); }

std::vector<ArrayPtr> run_global_program(const ProgramPtr& traced_ptr, const std::vector<ArrayPtr>& args) {
  const Program& traced = *traced_ptr;
  timeline::HostSpan span("PjitFunction", traced.name);
  if (args.size() != traced.invars.size())
    fail<TypeError>("program expects ", traced.invars.size(), " arguments, got ", args.size());
  // A program partitioned over an Auto mesh runs without the bit-visible
  // rewrites (its layouts are planned once per program it runs).
  const bool partitioned = !single_device(traced, args) && auto_mesh_of(traced);
  const ProgramPtr program_ptr = as_run(traced_ptr, /*rewrite=*/!partitioned);
  const Program& program = *program_ptr;
  if (single_device(program, args)) {
    const std::vector<int> last = last_uses(program);
    Tensors in(args.size());
    for (size_t i = 0; i < args.size(); ++i)  // unread (e.g. donated) arguments stay untouched
      if (last[program.invars[i]] >= 0) in[i] = args[i]->global();
    Tensors res;
    if (small_products(program)) with_one_blas_thread([&] { res = run_program(program_ptr, std::move(in)); });
    else res = run_program(program_ptr, std::move(in));
    std::vector<ArrayPtr> results;
    for (size_t i = 0; i < program.outvars.size(); ++i) {
      const int v = program.outvars[i];
      auto arg = std::find(program.invars.begin(), program.invars.end(), v);
      if (arg != program.invars.end()) results.push_back(args[arg - program.invars.begin()]);
      // A result leaves row-major, as XLA lays it out: a layout-only last step
      // (the transpose ending a weight's gradient) leaves a strided view,
      // which every later program would read strided (a momentum update of
      // f32[784,512] gradients spent a third of its time gathering columns).
      else results.push_back(Array::from_tensor(res[i].contiguous(), program.avals[v].weak_type));
    }
    return results;
  }
  if (MeshPtr mesh = auto_mesh_of(program)) return run_partitioned(program, args, mesh);
  std::vector<ArrayPtr> env = initial_env(program, args);
  // Results computed with more of their dims whole than their layouts (the
  // plan's `computed`): uses laid out with fewer axes slice these.
  std::vector<ArrayPtr> fuller(program.avals.size());
  const std::vector<int> last = last_uses(program);

  std::vector<ArrayPtr> arrays;
  Avals ins_avals, outs;
  for (size_t k = 0; k < program.eqns.size(); ++k) {
    const Equation& e = program.eqns[k];
    outs.clear();
    for (int v : e.outputs) outs.push_back(program.avals[v]);
    arrays.clear();
    ins_avals.clear();
    for (int v : e.inputs) {
      arrays.push_back(env[v]);
      ins_avals.push_back(program.avals[v]);
    }
    std::vector<ArrayPtr> res = apply_primitive(*e.prim, arrays, ins_avals, e.params, outs);
    for (size_t i = 0; i < res.size(); ++i) env[e.outputs[i]] = std::move(res[i]);
    for (int v : e.inputs)
      if (last[v] == static_cast<int>(k)) env[v] = nullptr;
  }
  std::vector<ArrayPtr> results;
  for (int v : program.outvars) results.push_back(env[v]);
  return results;
}

std::optional<std::pair<MeshPtr, std::vector<Spec>>> auto_layouts(const Program& program,
                                                                  const std::vector<ArrayPtr>& args) {
  MeshPtr mesh = auto_mesh_of(program);
  if (!mesh || args.size() != program.invars.size()) return std::nullopt;
  return std::make_pair(mesh, plan_for(program, *mesh, args)->value);
}

namespace {

bool holds_global_primitive(const Program& program);

// Whether a call's sub-programs (its params) need whole sharded arrays
// somewhere inside them: a primitive with an `array_kernel` (shard_map,
// reshard), at any depth.
bool calls_global_primitive(const Params& params) {
  for (const auto& [key, value] : params.items()) {
    if (auto* p = std::get_if<ProgramPtr>(&value); p && *p && holds_global_primitive(**p)) return true;
    if (auto* l = std::get_if<ProgramList>(&value))
      for (const ProgramPtr& q : *l)
        if (q && holds_global_primitive(*q)) return true;
  }
  return false;
}

bool holds_global_primitive(const Program& program) {
  for (const Equation& e : program.eqns)
    if (e.prim->array_kernel || calls_global_primitive(e.params)) return true;
  return false;
}

}  // namespace

std::vector<ArrayPtr> apply_eagerly(const Primitive& prim, const std::vector<ArrayPtr>& args,
                                    const Avals& in, const Params& params, const Avals& out) {
  auto one_equation = [&] {
    auto program = std::make_shared<Program>();
    program->name = prim.name;
    Equation e{&prim, params, {}, {}};
    for (const Aval& a : in) e.inputs.push_back(program->new_var(a));
    for (const Aval& a : out) e.outputs.push_back(program->new_var(a));
    program->invars = e.inputs;
    program->outvars = e.outputs;
    program->eqns.push_back(std::move(e));
    return program;
  };
  // A call (jit, remat) bound outside any trace, as evaluating grad's forward
  // program binds a nested jit, whose body holds a shard_map: it runs as the
  // jitted program it is, over global arrays (partitioned on an Auto mesh);
  // one device's kernel cannot run the shard_map.
  if (!prim.array_kernel && !prim.sub_program_params.empty() && calls_global_primitive(params))
    return run_global_program(one_equation(), args);
  bool on_auto_mesh = false;
  for (const Aval& a : in)
    if (a.mesh && a.mesh->size() > 1)
      for (AxisType t : a.mesh->axis_types) on_auto_mesh |= t == AxisType::Auto;
  if (on_auto_mesh && !prim.array_kernel && !prim.is_collective()) {
    const ProgramPtr program = one_equation();
    if (MeshPtr mesh = auto_mesh_of(*program)) return run_partitioned(*program, args, mesh);
  }
  return apply_primitive(prim, args, in, params, out);
}

}  // namespace meshsim
