#include "meshsim/runtime/mesh_executor.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "meshsim/core/cancel.h"
#include "meshsim/core/sub_axes.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/scratch.h"
#include "meshsim/runtime/sharded.h"
#include "meshsim/runtime/sub_program_calls.h"
#include "meshsim/runtime/timeline.h"

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace meshsim {

int64_t MeshContext::axis_index(int64_t pos, const AxisNames& axes) const {
  std::vector<int64_t> c = mesh_.coords(pos);
  int64_t i = 0;
  for (const auto& a : axes) i = i * mesh_.axis_size(a) + axis_coord(mesh_, a, c);
  return i;
}

int64_t MeshContext::axis_size(const AxisNames& axes) const {
  int64_t n = 1;
  for (const auto& a : axes) n *= mesh_.axis_size(a);
  return n;
}

std::vector<std::vector<int64_t>> MeshContext::groups(const AxisNames& axes) const {
  // The groups would not partition the devices (JAX's text; the Python
  // wrappers raise it first, this guards direct binds).
  for (size_t i = 0; i < axes.size(); ++i)
    if (std::find(axes.begin() + i + 1, axes.end(), axes[i]) != axes.end())
      fail<ValueError>("repeated axis in `source` argument");
  const AxisNames others = unused_axes(mesh_, axes);
  const int64_t size = axis_size(axes);
  std::vector<std::vector<int64_t>> out(num_devices() / size, std::vector<int64_t>(size));
  for (int64_t pos = 0; pos < num_devices(); ++pos)
    out[axis_index(pos, others)][axis_index(pos, axes)] = pos;
  return out;
}

void MeshContext::parallel_for(int64_t n, const std::function<void(int64_t)>& f) const {
  if (n == 1) return f(0);
  CancelToken* token = current_cancel_token();  // worker threads compute for the same program
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1), [&](const tbb::blocked_range<int64_t>& r) {
    CancelScope scope(token);
    for (int64_t i = r.begin(); i != r.end(); ++i) f(i);
  });
}

namespace {

// One BLAS thread per device task while any mesh runs: the parallelism comes
// from the devices, and OpenBLAS's own pool would oversubscribe the cores.
// Counted, so programs running concurrently on several meshes agree on it.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (active_++ == 0) {
      saved_ = openblas_get_num_threads();
      openblas_set_num_threads(1);
    }
  }
  ~SingleThreadedBlas() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--active_ == 0) openblas_set_num_threads(saved_);
  }

 private:
  static inline std::mutex mutex_;
  static inline int active_ = 0;
  static inline int saved_ = 1;
};

}  // namespace

void with_one_blas_thread(const std::function<void()>& f) {
  SingleThreadedBlas one_blas_thread;
  f();
}

namespace {

bool same_view(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.raw() == b.raw() && a.dtype() == b.dtype() &&
         a.shape() == b.shape() && a.strides() == b.strides();
}

// Which devices hold equal values. Local primitives are pure functions of
// their inputs (and never write into them: devices may share a buffer), so
// devices whose inputs are equal compute equal outputs: an
// equation runs on one device of each such group (the group's owner) and the
// others share its result. Work invariant over a mesh axis is then done once,
// as it is stored once (DESIGN.md, principle 5).
class Sharing {
 public:
  Sharing(const Mesh& mesh, size_t num_vars)
      : mesh_(mesh), n_(mesh.size()), owner_(num_vars),
        uniform_(std::make_shared<const Owners>(n_, 0)) {}

  // The device whose value of `v` equals device `d`'s (`d` when none before it).
  int64_t owner(int64_t d, int v) const { return (*owner_[v])[d]; }

  // Equal along the axes the type neither varies nor is unreduced over (check_vma=True):
  // over an unreduced axis each device holds its own term of the pending sum.
  void from_type(int v, const Aval& type) {
    AxisNames differing = type.vma;
    for (const auto& a : type.unreduced)
      if (std::find(differing.begin(), differing.end(), a) == differing.end()) differing.push_back(a);
    from_axes(v, differing);
  }

  void from_axes(int v, const AxisNames& vma) {
    Partition& p = by_type_[vma];
    if (!p) {
      Owners out(n_);
      for (int64_t d = 0; d < n_; ++d) {
        std::vector<int64_t> c = mesh_.coords(d);
        int64_t rep = 0;
        for (size_t i = 0; i < c.size(); ++i) {
          bool varies = std::find(vma.begin(), vma.end(), mesh_.axis_names[i]) != vma.end();
          rep = rep * mesh_.axis_sizes[i] + (varies ? c[i] : 0);
        }
        out[d] = rep;
      }
      p = intern(std::move(out));
    }
    owner_[v] = p;
  }

  // Equal where the devices hold the same view of the same buffer.
  void from_buffers(int v, const std::vector<Tensor>& blocks) {
    Owners out(n_);
    std::vector<int64_t> seen;  // first device of each distinct view
    for (int64_t d = 0; d < n_; ++d) {
      auto it = std::find_if(seen.begin(), seen.end(),
                             [&](int64_t e) { return same_view(blocks[e], blocks[d]); });
      out[d] = it == seen.end() ? d : *it;
      if (it == seen.end() && seen.size() < 64) seen.push_back(d);  // bounded: O(n) per value
    }
    owner_[v] = intern(std::move(out));
  }

  // Equal where all the equation's inputs are: the meet of their partitions
  // (values equal everywhere refine nothing; meets are cached, so a long run
  // of equations over the same few partitions costs O(1) each).
  void from_inputs(const Equation& e) {
    Partition p = uniform_;
    for (int v : e.inputs) {
      const Partition& q = owner_[v];
      if (q == uniform_ || q == p) continue;
      p = p == uniform_ ? q : meet(p, q);
    }
    for (int v : e.outputs) owner_[v] = p;
  }

 private:
  using Owners = std::vector<int64_t>;
  using Partition = std::shared_ptr<const Owners>;

  // One shared object per distinct partition, so equal ones compare by pointer.
  Partition intern(Owners owners) {
    for (const Partition& p : interned_)
      if (*p == owners) return p;
    if (owners == *uniform_) return uniform_;
    interned_.push_back(std::make_shared<const Owners>(std::move(owners)));
    return interned_.back();
  }

  Partition meet(const Partition& a, const Partition& b) {
    Partition& m = meets_[{a.get(), b.get()}];
    if (!m) {
      std::unordered_map<int64_t, int64_t> first;
      Owners out(n_);
      for (int64_t d = 0; d < n_; ++d)
        out[d] = first.emplace((*a)[d] * n_ + (*b)[d], d).first->second;
      m = intern(std::move(out));
    }
    return m;
  }

  const Mesh& mesh_;
  int64_t n_;
  std::vector<Partition> owner_;  // per variable
  Partition uniform_;             // every device equal
  std::vector<Partition> interned_;
  std::map<AxisNames, Partition> by_type_;
  std::map<std::pair<const Owners*, const Owners*>, Partition> meets_;  // keys kept alive by interned_
};

}  // namespace

namespace {

// A run whose devices' work adds up to less than this many units runs its
// devices one after the other on the calling thread: handing a device to
// another thread costs a wake-up (microseconds, and far more on a loaded
// machine) that work this small does not repay.
constexpr double kHeavyRun = 256;

double equation_weight(const Program& body, const Equation& e);

// Which devices compute the equations of a run of local equations: each
// equation only on the devices that own its result, plus those that need it
// for an equation they own; the others share the owner's result.
struct RunOwners {
  std::vector<std::vector<char>> computes;  // per device, per equation of the run
  std::vector<char> busy;                   // per device: whether it computes any
  int64_t computing = 0;                    // devices that compute some equation of the run
  // Values outliving the run that a device did not compute: (its slot, the
  // computing device's slot) in the table of held values.
  std::vector<std::pair<size_t, size_t>> shared;
};

// What run_on_mesh works out from the body alone, once per body: the runs of
// local equations between collectives and which values outlive their run,
// beside the body's schedule (last uses, result types, moves). Values that
// outlive a run live in one flat table of `num_held` slots per device
// (`held[v] * n + d`), reused between calls; a run's temporaries live in the
// task of each device that computes them.
struct ExecutionPlan {
  struct Run {
    size_t begin, end;                 // equations [begin, end); one mesh-wide equation when `collective`
    bool collective;
    std::vector<int> outlive;          // outputs used after the run (or results of the body)
    std::vector<int> temporaries;      // outputs used only inside it
    std::vector<int> released;         // held values read for the last time in the run
    double weight = 0;                 // a device's work in the run, in units of a small equation
  };
  std::shared_ptr<const Schedule> schedule;
  std::vector<int> producer;           // per variable: the equation computing it, -1 for inputs
  std::vector<int> slot;               // per temporary: its index in its run's local values
  // Per variable held between runs (constants, arguments, collectives' results,
  // values outliving their run): its slot in the table, else -1.
  std::vector<int> held;
  int num_held = 0;
  std::vector<Run> runs;
  // Whether which devices compute what follows from the body's types alone
  // (check_vma=True and every collective's result typed by its VMA): then it
  // is worked out once per mesh shape (`owners`) instead of per call.
  bool typed_owners = true;

  explicit ExecutionPlan(const ProgramPtr& body_ptr) : schedule(schedule_of(body_ptr)) {
    const Program& body = *body_ptr;
    const size_t num_vars = body.avals.size();
    const std::vector<int>& last = schedule->last;
    producer.assign(num_vars, -1);
    slot.assign(num_vars, -1);
    held.assign(num_vars, -1);
    auto hold = [&](int v) {
      if (held[v] < 0) held[v] = num_held++;
    };
    for (int v : body.constvars) hold(v);
    for (int v : body.invars) hold(v);
    for (size_t j = 0; j < body.eqns.size(); ++j)
      for (int v : body.eqns[j].outputs) producer[v] = static_cast<int>(j);
    // Collectives, and calls whose sub-programs hold some, run over all devices at once.
    auto mesh_wide = [&](size_t j) {
      const Equation& e = body.eqns[j];
      return e.prim->is_collective() || (e.prim->mesh_call && calls_collective(e));
    };
    size_t k = 0;
    while (k < body.eqns.size()) {
      Run r{k, k + 1, mesh_wide(k), {}, {}, {}};
      if (r.collective) {
        for (int v : body.eqns[k].outputs) hold(v);
        typed_owners = typed_owners && !body.eqns[k].prim->result_vma_unchecked;
      } else {
        while (r.end < body.eqns.size() && !mesh_wide(r.end)) ++r.end;
        for (size_t j = r.begin; j < r.end; ++j) r.weight += equation_weight(body, body.eqns[j]);
        for (size_t j = r.begin; j < r.end; ++j)
          for (int v : body.eqns[j].outputs) {
            if (last[v] >= static_cast<int>(r.end)) {
              r.outlive.push_back(v);
              hold(v);
            } else {
              slot[v] = static_cast<int>(r.temporaries.size());
              r.temporaries.push_back(v);
            }
          }
      }
      for (size_t j = r.begin; j < r.end; ++j)
        for (int v : schedule->freed[j])
          if (held[v] >= 0) r.released.push_back(v);
      k = r.end;
      runs.push_back(std::move(r));
    }
  }

  // Per local run, which devices compute what when the body runs typed
  // (`typed_owners`) on a mesh of `mesh`'s shape; made on first use.
  std::shared_ptr<const std::vector<RunOwners>> owners(const Program& body, const Mesh& mesh) const;

 private:
  mutable std::mutex owners_mutex_;
  mutable std::map<std::pair<AxisNames, std::vector<int64_t>>, std::shared_ptr<const std::vector<RunOwners>>>
      owners_;
};

// A rough measure of an equation's work on one device, in units of an
// equation on a few hundred elements (~0.4 us): the dispatch, plus its
// elements; a call of sub-programs (a loop, a branch) counts as much work.
double equation_weight(const Program& body, const Equation& e) {
  if (!sub_programs(e).empty()) return kHeavyRun;
  double elements = 0;
  for (const std::vector<int>* vars : {&e.inputs, &e.outputs})
    for (int v : *vars) elements += static_cast<double>(num_elements(body.avals[v].shape));
  return 1 + elements / 2048;
}

// Adds to each device's equations of the run [begin, end) (`runs[d]`, one
// flag per equation) those computing operands of its equations. Devices that
// own the same equations need the same ones, so the walk over operands is
// done once per distinct set (a few per run: the owners of each partition).
void close_over_operands(const Program& body, const std::vector<int>& producer, size_t begin,
                         std::vector<std::vector<char>>& runs) {
  std::vector<size_t> done;  // devices whose sets are closed, each with a distinct owned set
  std::vector<std::vector<char>> owned;  // their sets before closing
  for (size_t d = 0; d < runs.size(); ++d) {
    std::vector<char>& mine = runs[d];
    if (std::find(mine.begin(), mine.end(), 0) == mine.end()) continue;  // runs them all
    auto same = std::find(owned.begin(), owned.end(), mine);
    if (same != owned.end()) {
      mine = runs[done[same - owned.begin()]];
      continue;
    }
    owned.push_back(mine);
    done.push_back(d);
    for (size_t j = begin + mine.size(); j-- > begin;)
      if (mine[j - begin])
        for (int v : body.eqns[j].inputs)
          if (producer[v] >= static_cast<int>(begin)) mine[producer[v] - begin] = 1;
  }
}

// Plans by body, valid while the body lives (bodies are immutable once traced).
std::shared_ptr<const ExecutionPlan> plan_for(const ProgramPtr& body) {
  static std::mutex mutex;
  static std::map<const Program*, std::pair<std::weak_ptr<Program>, std::shared_ptr<const ExecutionPlan>>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(body.get());
  if (it != cache.end() && !it->second.first.expired()) return it->second.second;
  if (cache.size() >= 256)
    for (auto i = cache.begin(); i != cache.end();)
      i = i->second.first.expired() ? cache.erase(i) : std::next(i);
  auto plan = std::make_shared<const ExecutionPlan>(body);
  cache[body.get()] = {body, plan};
  return plan;
}

// Which devices compute what in local run `run`, from the partitions of its
// inputs in `sharing` (which learns those of its outputs).
RunOwners owners_of(const Program& body, const ExecutionPlan& plan, const ExecutionPlan::Run& run,
                    Sharing& sharing, int64_t n) {
  const size_t begin = run.begin, end = run.end;
  RunOwners o;
  o.computes.assign(n, std::vector<char>(end - begin));
  for (size_t j = begin; j < end; ++j) {
    const Equation& eq = body.eqns[j];
    sharing.from_inputs(eq);
    for (int64_t d = 0; d < n; ++d)
      o.computes[d][j - begin] = eq.outputs.empty() || sharing.owner(d, eq.outputs[0]) == d;
  }
  close_over_operands(body, plan.producer, begin, o.computes);
  o.busy.resize(n);
  for (int64_t d = 0; d < n; ++d) {
    o.busy[d] = std::find(o.computes[d].begin(), o.computes[d].end(), 1) != o.computes[d].end();
    o.computing += o.busy[d];
  }
  for (int v : run.outlive)
    for (int64_t d = 0; d < n; ++d)
      if (!o.computes[d][plan.producer[v] - begin])
        o.shared.emplace_back(plan.held[v] * n + d, plan.held[v] * n + sharing.owner(d, v));
  return o;
}

// The partitions of the body's inputs: its constants are the same tensors on
// every device; its arguments are equal along the axes their types are
// invariant over (`vma_checked`), else where they are the same buffer
// (`args` by variable then device, read only then).
void share_inputs(Sharing& sharing, const Program& body, bool vma_checked, int64_t n,
                  const std::function<const std::vector<Tensor>&(int)>& args) {
  for (size_t i = 0; i < body.constvars.size(); ++i)
    sharing.from_buffers(body.constvars[i], std::vector<Tensor>(n, body.consts[i]));
  for (int v : body.invars) {
    if (vma_checked) sharing.from_type(v, body.avals[v]);
    else sharing.from_buffers(v, args(v));
  }
}

std::shared_ptr<const std::vector<RunOwners>> ExecutionPlan::owners(const Program& body, const Mesh& mesh) const {
  std::lock_guard<std::mutex> lock(owners_mutex_);
  auto& cached = owners_[{mesh.axis_names, mesh.axis_sizes}];
  if (cached) return cached;
  const int64_t n = mesh.size();
  Sharing sharing(mesh, body.avals.size());
  share_inputs(sharing, body, /*vma_checked=*/true, n, nullptr);
  auto out = std::make_shared<std::vector<RunOwners>>();
  for (const Run& run : runs) {
    if (!run.collective) {
      out->push_back(owners_of(body, *this, run, sharing, n));
      continue;
    }
    for (int v : body.eqns[run.begin].outputs) sharing.from_type(v, body.avals[v]);
    out->emplace_back();
  }
  cached = out;
  return cached;
}

}  // namespace

std::vector<Tensors> run_on_mesh(const ProgramPtr& body_ptr, const Mesh& mesh, std::vector<Tensors> args,
                                 bool vma_checked) {
  if (const SubProgramCall* partitioned = PartitionedSubPrograms::find(body_ptr.get()))
    return (*partitioned)(std::move(args));
  const Program& body = *body_ptr;
  const std::shared_ptr<const ExecutionPlan> plan_ptr = plan_for(body_ptr);
  const ExecutionPlan& plan = *plan_ptr;
  const int64_t n = mesh.size();
  MeshContext ctx(mesh, vma_checked);
  for (int64_t d = 0; d < n; ++d)
    if (args[d].size() != body.invars.size())
      fail<TypeError>("shard_map body expects ", body.invars.size(), " arguments, got ",
                      args[d].size());
  // The held values, device by device per variable (`held[v] * n + d`).
  ScratchFrame table(static_cast<size_t>(plan.num_held) * n);
  std::vector<Tensor>& env = table.values();
  const std::vector<int>& held = plan.held;
  for (size_t i = 0; i < body.constvars.size(); ++i)
    std::fill_n(env.begin() + held[body.constvars[i]] * n, n, body.consts[i]);
  for (int64_t d = 0; d < n; ++d)
    for (size_t i = 0; i < args[d].size(); ++i) env[held[body.invars[i]] * n + d] = std::move(args[d][i]);

  // Who computes what: worked out once per mesh shape when the types say it,
  // else per call from the buffers the devices hold.
  const bool typed = vma_checked && plan.typed_owners;
  std::shared_ptr<const std::vector<RunOwners>> typed_owners;
  std::optional<Sharing> sharing;
  auto of_devices = [&](int v) {
    return std::vector<Tensor>(env.begin() + held[v] * n, env.begin() + (held[v] + 1) * n);
  };
  if (typed) {
    typed_owners = plan.owners(body, mesh);
  } else {
    sharing.emplace(mesh, body.avals.size());
    std::vector<Tensor> blocks;
    share_inputs(*sharing, body, vma_checked, n, [&](int v) -> const std::vector<Tensor>& {
      return blocks = of_devices(v);
    });
  }
  const Schedule& schedule = *plan.schedule;
  const std::vector<int>& slot = plan.slot;

  SingleThreadedBlas one_blas_thread;
  for (size_t r = 0; r < plan.runs.size(); ++r) {
    const ExecutionPlan::Run& run = plan.runs[r];
    check_cancelled();
    const size_t k = run.begin;
    if (run.collective) {
      const Equation& e = body.eqns[k];
      // Operands read here for the last time are moved in, not copied.
      const std::vector<char>& moved = schedule.moved[k];
      std::vector<Tensors> ins(n);
      for (int64_t d = 0; d < n; ++d) {
        ins[d].reserve(e.inputs.size());
        for (size_t i = 0; i < e.inputs.size(); ++i) {
          Tensor& t = env[held[e.inputs[i]] * n + d];
          ins[d].push_back(moved[i] ? std::move(t) : t);
        }
      }
      // A call's sub-programs record their own collectives.
      std::vector<Tensors> res = e.prim->is_collective()
                                     ? run_collective(*e.prim, ctx, ins, e.params, schedule.out_avals[k])
                                     : e.prim->mesh_call(ctx, ins, e.params, schedule.out_avals[k]);
      for (size_t i = 0; i < e.outputs.size(); ++i) {
        const int v = e.outputs[i];
        for (int64_t d = 0; d < n; ++d) env[held[v] * n + d] = std::move(res[d][i]);
        if (typed) continue;
        if (vma_checked && !e.prim->result_vma_unchecked) sharing->from_type(v, body.avals[v]);
        else sharing->from_buffers(v, of_devices(v));
      }
    } else {
      // The run of local equations up to the next collective, on every device at once.
      std::optional<RunOwners> worked_out;
      if (!typed) worked_out = owners_of(body, plan, run, *sharing, n);
      const RunOwners& owners = typed ? (*typed_owners)[r] : *worked_out;
      const size_t begin = run.begin, end = run.end;
      auto device_task = [&](int64_t d) {
        timeline::DeviceScope on_device(mesh.device_ids[d]);
        if (!owners.busy[d]) return;
        ScratchFrame scratch(run.temporaries.size());
        std::vector<Tensor>& local = scratch.values();
        auto value = [&](int v) -> Tensor& { return slot[v] >= 0 ? local[slot[v]] : env[held[v] * n + d]; };
        const std::vector<char>& mine = owners.computes[d];
        auto one = [&](size_t j) {
          if (mine[j - begin])
            run_equation(body.eqns[j], schedule.out_avals[j], schedule.moved[j], schedule.freed[j],
                         scratch.operands(), value);
        };
        if ((!schedule.fusion.empty() || !schedule.scalars.empty()) && fusion_enabled()) {
          // Fused where this device computes every equation of the run.
          auto fused = [&](const FusedGroup& g) {
            for (size_t j : g.members)
              if (!mine[j - begin]) return false;
            return run_fused(g, schedule.freed, value);
          };
          // A scalar run where this device computes every equation of it that
          // was not folded when planned (writing the folded values it holds is
          // harmless: they are equal on every device).
          auto scalar = [&](const ScalarRun& sr) {
            for (size_t j = sr.first; j <= sr.last; ++j)
              if (sr.computed[j - sr.first] && !mine[j - begin]) return false;
            return run_scalar_run(sr, schedule.freed, value);
          };
          for (size_t j = begin; j < end; ++j) run_in_schedule(schedule, j, one, fused, scalar);
        } else {
          for (size_t j = begin; j < end; ++j) one(j);
        }
      };
      if (owners.computing * run.weight >= kHeavyRun) ctx.parallel_for(n, device_task);
      else
        for (int64_t d = 0; d < n; ++d) device_task(d);
      // Devices that skipped an equation share the owner's result.
      for (const auto& [to, from] : owners.shared) env[to] = env[from];
    }
    // Values read for the last time in the run, in one pass over their slots.
    for (int v : run.released)
      for (Tensor* t = &env[held[v] * n], *stop = t + n; t != stop; ++t)
        if (t->defined()) *t = Tensor();
  }

  // The table's slots go back with it: each result's last occurrence takes its tensor.
  const std::vector<int>& outvars = body.outvars;
  std::vector<Tensors> results(n);
  for (int64_t d = 0; d < n; ++d) {
    results[d].reserve(outvars.size());
    for (auto it = outvars.begin(); it != outvars.end(); ++it) {
      Tensor& t = env[held[*it] * n + d];
      results[d].push_back(std::find(it + 1, outvars.end(), *it) == outvars.end() ? std::move(t) : t);
    }
  }
  return results;
}

}  // namespace meshsim
