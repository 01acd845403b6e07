// Asynchronous dispatch: a call enqueues its program and returns arrays whose
// values are futures (core/array.h's PendingValue).
//
// Each set of devices that programs run on has one stream: a thread running
// its programs in the order they were dispatched. A program waits for the
// last program dispatched to any of its devices and for its pending
// arguments (both dispatched earlier, so waits never form a cycle), then
// calls the executor as a synchronous call would. Programs on disjoint device
// sets therefore run at the same time; programs sharing a device run in call
// order. Dispatching (finding the waits, queueing on the stream) is one
// atomic step, so every stream holds its programs in dispatch order and a
// program waits only for programs queued before it: no cycle, no deadlock.
// The stream is a plain thread, not a TBB task: it blocks while it
// waits, and TBB tasks must not. An error raised while running is stored in
// the results and raised where they are read; later programs are unaffected.
#pragma once
#include <string>
#include <vector>

#include "meshsim/core/array.h"
#include "meshsim/ir/program.h"

namespace meshsim {

// On by default (JAX's `jax_cpu_enable_async_dispatch`); off, every call runs
// before it returns and raises its errors at once.
void set_async_dispatch(bool enabled);
bool async_dispatch_enabled();

// Runs `program` on `args` (a jitted call). Arguments with `donated[i]` are
// deleted: their value belongs to the program from now on. Raises at once
// for deleted arguments and an argument donated and also passed again.
std::vector<ArrayPtr> dispatch_program(const ProgramPtr& program, std::vector<ArrayPtr> args,
                                       const std::vector<bool>& donated = {});

// An eager application of `prim` (no trace) big enough to run as a
// dispatched one-equation program rather than on the calling thread: then it
// is asynchronous like a jitted call, and Ctrl-C while its result is awaited
// stops it at its next check point. Null for small ones (the hand-off to a
// stream would cost more than the work), for all but Kind::Local primitives
// (host callbacks, say, run in call order on the caller), and when dispatch
// is synchronous.
ProgramPtr eager_program(const Primitive& prim, const Avals& in, const Params& params, const Avals& out);
// The program of one equation applying `prim` (an eager shard_map is always
// dispatched as one: it may run for any time).
ProgramPtr single_equation_program(const Primitive& prim, const Avals& in, const Params& params,
                                   const Avals& out);

// `x`'s value laid out as `sharding` (device_put), once `x` is computed.
ArrayPtr dispatch_reshard(const ArrayPtr& x, ShardingPtr sharding);

// Waits until every program dispatched so far has run.
void wait_all_dispatched();

// Cancels every program dispatched and not yet finished (Ctrl-C): each stops
// at its next check point (core/cancel.h) and its results raise Cancelled.
void cancel_dispatched();

// Streams that currently have a thread (idle ones end after a while).
size_t num_dispatch_streams();

// One program a stream ran: its name, devices, stream, and when it started and
// ended (seconds on a steady clock, after its inputs were ready).
struct DispatchRecord {
  std::string name;
  std::vector<int> devices;
  int stream = -1;  // -1: ran on the calling thread
  double start = 0, end = 0;
  bool failed = false;
};
// While a recorder is open, programs that finish are appended to it.
void push_dispatch_recorder();
std::vector<DispatchRecord> pop_dispatch_recorder();

}  // namespace meshsim
