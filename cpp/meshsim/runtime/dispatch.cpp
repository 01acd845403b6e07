#include "meshsim/runtime/dispatch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "meshsim/core/cancel.h"
#include "meshsim/core/error.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/sharded.h"

namespace meshsim {

namespace {

std::atomic<bool> g_async{true};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Completion of one dispatched program: what later programs on its devices wait for.
class Event {
 public:
  bool done() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  void wait() const {
    if (done()) return;
    blocking_wait([this](std::chrono::milliseconds timeout) {
      std::unique_lock<std::mutex> lock(mutex_);
      return cv_.wait_for(lock, timeout, [this] { return done_; });
    });
  }
  void set() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;
};
using EventPtr = std::shared_ptr<Event>;

class Stream;
using StreamPtr = std::shared_ptr<Stream>;

// How long a stream's thread stays without work before it ends, and how many
// idle streams may keep a thread while new device sets get one: a program
// making many meshes does not keep a thread per mesh.
constexpr auto kStreamIdleLifetime = std::chrono::seconds(2);
constexpr size_t kMaxStreams = 16;

// A thread running one device set's programs in dispatch order. Tasks are
// pushed only while the dispatcher's mutex is held, in dispatch order; the
// thread takes its own mutex only to pop. An idle stream is retired (its
// thread ends, it leaves the dispatcher) only while the dispatcher's mutex is
// held and its queue is empty, so no task is ever pushed to a retired stream.
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  explicit Stream(int id) : id_(id) {}
  // Raises std::system_error when the OS refuses a thread.
  void start() {
    std::thread([self = shared_from_this()] { self->loop(); }).detach();
  }
  int id() const { return id_; }
  void push(std::function<void()> task) {  // dispatcher mutex held
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Dispatcher mutex held: ends the thread if the stream has nothing to do.
  bool retire_if_idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!tasks_.empty() || running_) return false;
    retired_ = true;
    cv_.notify_one();
    return true;
  }

 private:
  void loop();
  int id_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool running_ = false;  // a task popped and not yet finished
  bool retired_ = false;
};

struct Dispatcher {
  // Lock order: Dispatcher::mutex, then a Stream's mutex. Nothing else is
  // acquired while holding either, and nobody waits while holding them.
  std::mutex mutex;
  std::map<std::vector<int>, StreamPtr> streams;
  std::vector<EventPtr> last;  // per device id: the last program dispatched to it
  int next_stream_id = 0;
  std::vector<std::weak_ptr<CancelToken>> live;  // tokens of programs not yet finished

  // Queues `make_task(deps, stream id)` on the stream of `devices`; `deps` are the
  // unfinished last programs of those devices, and `done` becomes their last
  // event. All of it happens under one lock, so the order of tasks in every
  // stream is the order of dispatch: a task only waits for tasks dispatched
  // before it, which are ahead of it in their streams and, by induction, finish.
  // (Pushing after releasing the lock let a later program overtake the one it
  // waits for on the same stream: a deadlock.)
  template <class MakeTask>
  void enqueue(const std::vector<int>& devices, const EventPtr& done, const CancelTokenPtr& token,
               MakeTask make_task) {
    std::lock_guard<std::mutex> lock(mutex);
    StreamPtr& slot = streams[devices];
    if (!slot) {
      if (streams.size() > kMaxStreams) retire_idle_streams(devices);
      auto s = std::make_shared<Stream>(next_stream_id);
      try {
        s->start();
      } catch (...) {
        streams.erase(devices);  // nothing registered: later programs do not wait for this one
        throw;
      }
      ++next_stream_id;
      slot = std::move(s);
    }
    StreamPtr stream = slot;
    std::vector<EventPtr> deps;
    for (int d : devices) {
      if (d >= static_cast<int>(last.size())) last.resize(d + 1);
      EventPtr& e = last[d];
      if (e && !e->done() && std::find(deps.begin(), deps.end(), e) == deps.end()) deps.push_back(e);
      e = done;
    }
    if (live.size() >= 64)
      live.erase(std::remove_if(live.begin(), live.end(), [](const auto& w) { return w.expired(); }),
                 live.end());
    live.push_back(token);
    stream->push(make_task(std::move(deps), stream->id()));
  }

  void retire_idle_streams(const std::vector<int>& keep) {
    for (auto it = streams.begin(); it != streams.end();)
      it = it->first != keep && it->second && it->second->retire_if_idle() ? streams.erase(it)
                                                                           : std::next(it);
  }

  // The stream's thread found it idle for a while: retire it unless work came.
  bool retire(Stream* s) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = streams.begin(); it != streams.end(); ++it)
      if (it->second.get() == s) {
        if (!s->retire_if_idle()) return false;
        streams.erase(it);
        return true;
      }
    return true;  // already retired
  }

  std::vector<EventPtr> pending_on(const std::vector<int>& devices) {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<EventPtr> out;
    for (int d : devices)
      if (d < static_cast<int>(last.size()) && last[d] && !last[d]->done()) out.push_back(last[d]);
    return out;
  }

  void cancel_all() {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& w : live)
      if (auto t = w.lock()) t->cancelled = true;
    live.clear();
  }

  size_t num_streams() {
    std::lock_guard<std::mutex> lock(mutex);
    return streams.size();
  }
};

Dispatcher& dispatcher() {
  static auto* d = new Dispatcher;  // never destroyed: streams may still run at exit
  return *d;
}

void Stream::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      running_ = false;
      while (tasks_.empty() && !retired_) {
        if (cv_.wait_for(lock, kStreamIdleLifetime) == std::cv_status::timeout && tasks_.empty() &&
            !retired_) {
          lock.unlock();  // lock order: the dispatcher's mutex first
          const bool retired = dispatcher().retire(this);
          lock.lock();
          if (retired) break;
        }
      }
      if (tasks_.empty()) return;  // retired: nothing can be pushed any more
      task = std::move(tasks_.front());
      tasks_.pop_front();
      running_ = true;
    }
    task();
  }
}

std::mutex g_record_mutex;
std::vector<std::vector<DispatchRecord>> g_recorders;

void record(DispatchRecord r) {
  std::lock_guard<std::mutex> lock(g_record_mutex);
  for (auto& rec : g_recorders) rec.push_back(r);
}

void add_mesh(std::vector<int>& devices, const Mesh* mesh) {
  devices.insert(devices.end(), mesh->device_ids.begin(), mesh->device_ids.end());
}

void add_placement(std::vector<int>& devices, const Sharding& s) {
  if (s.mesh) add_mesh(devices, s.mesh.get());
  else devices.push_back(s.device);
}

void normalize(std::vector<int>& devices) {
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  if (devices.empty()) devices.push_back(0);  // no arguments, nothing sharded: the default device
}

// The devices a program touches: where its arguments live and the meshes of
// its sharded types and shard_maps. (An argument whose placement is not yet
// known adds none; the program waits for its value anyway.)
std::vector<int> devices_of(const Program& program, const std::vector<ArrayPtr>& args) {
  std::vector<int> devices;
  for (const ArrayPtr& a : args)
    if (a->has_sharding()) add_placement(devices, *a->sharding());
  const Mesh* seen = nullptr;
  for (const Aval& a : program.avals)
    if (a.mesh && a.mesh.get() != seen) add_mesh(devices, seen = a.mesh.get());
  for (const Equation& e : program.eqns)
    if (e.prim->array_kernel && e.params.has("mesh")) {
      const MeshPtr& m = e.params.get<MeshPtr>("mesh");
      if (m.get() != seen) add_mesh(devices, seen = m.get());
    }
  normalize(devices);
  return devices;
}

Spec trimmed(const Spec& spec) {
  Spec s = spec;
  while (!s.empty() && s.back().empty()) s.pop_back();
  return s;
}

bool same_placement(const Sharding& a, const Sharding& b) {
  return a.mesh == b.mesh && (a.mesh ? trimmed(a.spec) == trimmed(b.spec) : a.device == b.device);
}

// Where a program's results live is a function of where its arguments live:
// remembered from the last run of each program, so that later calls return
// futures whose sharding is known at once (a jitted call keys its cache on it).
struct KnownPlacement {
  std::weak_ptr<Program> program;
  std::vector<ShardingPtr> in, out;
};
std::mutex g_known_mutex;
std::map<const Program*, KnownPlacement> g_known;

std::vector<ShardingPtr> known_placement(const ProgramPtr& program, const std::vector<ArrayPtr>& args) {
  std::lock_guard<std::mutex> lock(g_known_mutex);
  auto it = g_known.find(program.get());
  if (it == g_known.end() || it->second.program.expired()) return {};
  const KnownPlacement& k = it->second;
  for (size_t i = 0; i < args.size(); ++i)
    if (!args[i]->has_sharding() || !same_placement(*args[i]->sharding(), *k.in[i])) return {};
  return k.out;
}

void remember_placement(const ProgramPtr& program, const std::vector<ArrayPtr>& args,
                        const std::vector<ArrayPtr>& results) {
  KnownPlacement k{program, {}, {}};
  for (const ArrayPtr& a : args) k.in.push_back(a->sharding());
  for (const ArrayPtr& r : results) k.out.push_back(r->sharding());
  std::lock_guard<std::mutex> lock(g_known_mutex);
  if (g_known.size() >= 1024)
    for (auto i = g_known.begin(); i != g_known.end();)
      i = i->second.program.expired() ? g_known.erase(i) : std::next(i);
  g_known[program.get()] = std::move(k);
}

// Work of about 5-10 ms or more on one core (products run at 50-60 GFLOP/s
// here, elementwise steps stream 20-30 GB/s): a wait for it should be
// interruptible, and the hand-off to a stream is small beside it. Less work
// runs on the calling thread: a hand-off costs two thread wake-ups (one to
// start the program, one for the reader of its result), tens of microseconds
// on an idle 2-core machine but milliseconds on a busy one, where each wake-up
// waits for a time slice. A batch-32 MLP's jitted gradient (233 MFLOP, ~4 ms
// of CPU) took 4-6 ms of wall time per call at a load of 15 when dispatched,
// 1 ms when run in place.
bool runs_for_a_while(const Cost& cost) {
  constexpr double kFlops = double(int64_t{1} << 28), kBytes = double(int64_t{1} << 28);
  return cost.flops >= kFlops || cost.bytes_accessed >= kBytes;
}

// The summed cost of a program's equations, worked out once per live program
// (not a new program at a freed one's address).
struct KnownCost {
  std::weak_ptr<Program> program;
  Cost cost;
};
std::mutex g_costs_mutex;
std::map<const Program*, KnownCost> g_costs;

Cost program_cost(const ProgramPtr& program) {
  {
    std::lock_guard<std::mutex> lock(g_costs_mutex);
    auto it = g_costs.find(program.get());
    if (it != g_costs.end() && !it->second.program.expired()) return it->second.cost;
  }
  Cost total;
  Avals in, out;
  for (const Equation& e : program->eqns) {
    in.clear();
    out.clear();
    for (int v : e.inputs) in.push_back(program->avals[v]);
    for (int v : e.outputs) out.push_back(program->avals[v]);
    const Cost c = cost_of(*e.prim, in, e.params, out);
    total.flops += c.flops;
    total.bytes_accessed += c.bytes_accessed;
  }
  std::lock_guard<std::mutex> lock(g_costs_mutex);
  if (g_costs.size() >= 1024)
    for (auto i = g_costs.begin(); i != g_costs.end();)
      i = i->second.program.expired() ? g_costs.erase(i) : std::next(i);
  g_costs[program.get()] = {program, total};
  return total;
}

// A program on one device that does not run for a while runs on the calling
// thread; its errors are still deferred to when its results are read.
// A primitive that calls a sub-program (declared Kind::ControlFlow or
// Kind::HigherOrder) may run for any time however small its cost: a loop's
// trip count is data, and a branch or a remat's body may hold a loop. Such a
// program goes to a stream, so the caller's wait for it can be interrupted.
bool calls_sub_program(const Primitive& prim) {
  return prim.kind == Kind::ControlFlow || prim.kind == Kind::HigherOrder;
}

bool runs_inline(const ProgramPtr& program, const std::vector<int>& devices) {
  if (devices.size() != 1) return false;
  for (const Equation& e : program->eqns)
    if (e.prim->kind == Kind::Global || calls_sub_program(*e.prim)) return false;
  for (const Aval& a : program->avals)
    if (a.mesh) return false;
  return !runs_for_a_while(program_cost(program));
}

// Results that failed: every read raises `error`.
std::vector<ArrayPtr> failed(const Program& program, std::exception_ptr error) {
  std::vector<ArrayPtr> out;
  for (int v : program.outvars) {
    auto p = std::make_shared<PendingValue>();
    p->set_error(error);
    out.push_back(std::make_shared<Array>(program.avals[v], nullptr, p));
  }
  return out;
}

[[noreturn]] void deleted_argument(size_t i) {
  fail<ValueError>("INVALID_ARGUMENT: Invalid buffer passed to Execute() as argument ", i,
                   " to replica 0: INVALID_ARGUMENT: Buffer has been deleted or donated.");
}

// Another thread may delete or donate an argument at any time: the checks
// here only give the usual error early, Array::donate_all decides.
void check_arguments(std::vector<ArrayPtr>& args, const std::vector<bool>& donated) {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i]->is_deleted()) deleted_argument(i);
  for (size_t i = 0; i < donated.size() && i < args.size(); ++i) {
    if (!donated[i]) continue;
    for (size_t j = 0; j < args.size(); ++j)
      if (j != i && args[j] == args[i])
        fail<std::runtime_error>(
            "INVALID_ARGUMENT: Attempt to use a buffer that was previously donated in the same "
            "call to Execute() (flattened argument ", std::max(i, j), ", replica 0, partition 0, "
            "first use: ", std::min(i, j), "). Toy example for this bug: `f(donate(a), a)`.");
  }
  std::vector<size_t> positions;
  std::vector<ArrayPtr> to_donate;
  for (size_t i = 0; i < donated.size() && i < args.size(); ++i)
    if (donated[i]) {
      positions.push_back(i);
      to_donate.push_back(args[i]);
    }
  if (to_donate.empty()) return;
  size_t deleted = 0;
  std::vector<ArrayPtr> moved = Array::donate_all(to_donate, &deleted);
  if (moved.empty()) deleted_argument(positions[deleted]);
  for (size_t k = 0; k < positions.size(); ++k) args[positions[k]] = std::move(moved[k]);
}

}  // namespace

void set_async_dispatch(bool enabled) { g_async = enabled; }
bool async_dispatch_enabled() { return g_async; }

std::vector<ArrayPtr> dispatch_program(const ProgramPtr& program_ptr, std::vector<ArrayPtr> args,
                                       const std::vector<bool>& donated) {
  const Program& program = *program_ptr;
  if (args.size() != program.invars.size())
    fail<TypeError>("program expects ", program.invars.size(), " arguments, got ", args.size());
  check_arguments(args, donated);
  std::vector<int> devices = devices_of(program, args);
  // Recorded collectives belong to the code run inside the recorder: run in place.
  const bool async = g_async && !recording_collectives();
  if (!async || runs_inline(program_ptr, devices)) {
    for (const EventPtr& e : dispatcher().pending_on(devices)) e->wait();
    for (const ArrayPtr& a : args) a->wait();
    if (!async) return run_global_program(program_ptr, args);
    try {
      return run_global_program(program_ptr, args);
    } catch (...) {
      return failed(program, std::current_exception());
    }
  }

  // Futures for the results; a result that is an argument is that argument.
  // The program keeps its own handles on the arguments' values.
  std::vector<ArrayPtr> given = args;
  for (ArrayPtr& a : args) a = a->share();
  std::vector<ShardingPtr> placement = known_placement(program_ptr, args);
  std::vector<ArrayPtr> outs;
  std::vector<PendingPtr> pending;
  for (size_t i = 0; i < program.outvars.size(); ++i) {
    const int v = program.outvars[i];
    auto arg = std::find(program.invars.begin(), program.invars.end(), v);
    if (arg != program.invars.end()) {
      outs.push_back(given[arg - program.invars.begin()]);
      pending.push_back(nullptr);
      continue;
    }
    pending.push_back(std::make_shared<PendingValue>());
    outs.push_back(std::make_shared<Array>(program.avals[v], placement.empty() ? nullptr : placement[i],
                                           pending.back()));
  }
  auto done = std::make_shared<Event>();
  auto token = std::make_shared<CancelToken>();
  const bool learn = placement.empty();
  auto make_task = [&](std::vector<EventPtr> deps, int id) -> std::function<void()> {
    return [program_ptr, args = std::move(args), pending, deps = std::move(deps), done, devices, id,
            learn, token]() mutable {
    for (const EventPtr& e : deps) e->wait();
    for (const ArrayPtr& a : args) a->wait();
    DispatchRecord r{program_ptr->name, devices, id, now(), 0, false};
    try {
      CancelScope scope(token.get());
      check_cancelled();
      std::vector<ArrayPtr> results = run_global_program(program_ptr, args);
      r.end = now();  // before any reader can start
      if (learn) remember_placement(program_ptr, args, results);
      for (size_t i = 0; i < results.size(); ++i)
        if (pending[i]) pending[i]->set(results[i]->sharding(), results[i]->shards());
    } catch (...) {
      r.failed = true;
      std::exception_ptr error = std::current_exception();
      r.end = now();
      for (const PendingPtr& p : pending)
        if (p && !p->done()) p->set_error(error);
    }
    args.clear();  // donated buffers go back before the next program starts
    record(std::move(r));
    done->set();
    };
  };
  dispatcher().enqueue(devices, done, token, make_task);
  return outs;
}

ProgramPtr eager_program(const Primitive& prim, const Avals& in, const Params& params, const Avals& out) {
  if (!g_async || recording_collectives() || prim.kind != Kind::Local) return nullptr;
  if (!runs_for_a_while(cost_of(prim, in, params, out))) return nullptr;
  return single_equation_program(prim, in, params, out);
}

ProgramPtr single_equation_program(const Primitive& prim, const Avals& in, const Params& params,
                                   const Avals& out) {
  auto program = std::make_shared<Program>();
  Equation e{&prim, params, {}, {}};
  for (const Aval& a : in) e.inputs.push_back(program->new_var(a));
  for (const Aval& a : out) e.outputs.push_back(program->new_var(a));
  program->invars = e.inputs;
  program->outvars = e.outputs;
  program->name = prim.name;
  program->eqns.push_back(std::move(e));
  return program;
}

ArrayPtr dispatch_reshard(const ArrayPtr& x, ShardingPtr sharding) {
  if (x->is_deleted()) x->shards();  // raises the deleted-array error
  const Aval& type = x->aval();
  if (!g_async || x->is_ready()) return shard_array(x->global(), std::move(sharding), type.weak_type);
  // Raises what shard_array would for a spec that does not fit.
  Aval placed = placed_aval(type.shape, type.dtype, type.weak_type, sharding);
  if (!sharding->is_single_device()) sharding->local_shape(type.shape);
  // The transfer is ordered on the devices it writes to; it reads the source
  // once that is computed, so the source's devices go on with their next
  // program meanwhile (a pipeline's producer does not wait for its consumer).
  std::vector<int> devices;
  add_placement(devices, *sharding);
  normalize(devices);
  auto pending = std::make_shared<PendingValue>();
  auto out = std::make_shared<Array>(std::move(placed), sharding, pending);
  auto done = std::make_shared<Event>();
  auto token = std::make_shared<CancelToken>();
  auto make_task = [&](std::vector<EventPtr> deps, int id) -> std::function<void()> {
    return [x = x->share(), sharding, pending, deps = std::move(deps), done, devices, id, token]() {
    for (const EventPtr& e : deps) e->wait();
    x->wait();
    DispatchRecord r{"device_put", devices, id, now(), 0, false};
    try {
      CancelScope scope(token.get());
      check_cancelled();
      ArrayPtr placed = shard_array(x->global(), sharding, x->aval().weak_type);
      r.end = now();
      pending->set(placed->sharding(), placed->shards());
    } catch (...) {
      r.failed = true;
      r.end = now();
      pending->set_error(std::current_exception());
    }
    record(std::move(r));
    done->set();
    };
  };
  dispatcher().enqueue(devices, done, token, make_task);
  return out;
}

void wait_all_dispatched() {
  std::vector<EventPtr> events;
  {
    Dispatcher& d = dispatcher();
    std::lock_guard<std::mutex> lock(d.mutex);
    for (const EventPtr& e : d.last)
      if (e && !e->done()) events.push_back(e);
  }
  for (const EventPtr& e : events) e->wait();
}

void cancel_dispatched() { dispatcher().cancel_all(); }

size_t num_dispatch_streams() { return dispatcher().num_streams(); }

void push_dispatch_recorder() {
  std::lock_guard<std::mutex> lock(g_record_mutex);
  g_recorders.emplace_back();
}

std::vector<DispatchRecord> pop_dispatch_recorder() {
  std::lock_guard<std::mutex> lock(g_record_mutex);
  if (g_recorders.empty()) return {};
  std::vector<DispatchRecord> out = std::move(g_recorders.back());
  g_recorders.pop_back();
  return out;
}

}  // namespace meshsim
