// Running primitives over global arrays whose types are sharded over Explicit
// mesh axes ("sharding in types").
//
// A primitive with a local plan (sharding/rules.h) runs on every device's own
// blocks as a parallel_for over devices: devices holding the same blocks
// compute once and share the result, so nothing is computed or stored twice
// and no bytes move. Where the plan needs other blocks (a reshard, a sharded
// contracting dimension on one side, a reduced sharded dimension) the data
// moves through collectives that are recorded with the bytes each device
// receives. Primitives without a plan fall back to assembling their operands,
// running on the whole value and splitting the result as its type says:
// correct, just slower (recorded as all-gathers of the sharded operands).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "meshsim/ir/primitive.h"

namespace meshsim {

// One collective a program executed: JAX's name for it, the mesh axes it
// spans and the bytes each device receives (the most any device receives),
// and per device of the mesh (by mesh position) its replica group and the
// bytes it sends and receives.
struct CollectiveRecord {
  std::string name;  // "all_gather", "all_to_all", "psum", "pmax", "pmin", "ppermute", ...
  AxisNames axes;
  int64_t bytes_per_device = 0;
  std::vector<int> device_ids;               // by mesh position
  std::vector<std::vector<int64_t>> groups;  // replica groups, as mesh positions
  std::vector<int64_t> sent, received;       // by mesh position
  int64_t steps = 0;                         // sequential latency steps of its algorithm
  int64_t start_ns = -1;                     // timeline::now_ns() when it started (-1: unknown)
};

// A collective over `axes` of `mesh` in which every device sends and receives
// `bytes` in n-1 steps (a ring over groups of n); `groups` default to the axes'.
CollectiveRecord symmetric_collective(std::string name, const Mesh& mesh, const AxisNames& axes,
                                      int64_t bytes, std::vector<std::vector<int64_t>> groups = {});

// While a recorder is open, executed collectives are appended to it (and to
// every enclosing one); while a profiler session is open they also become
// timeline spans on each device (runtime/timeline.h).
void push_collective_recorder();
std::vector<CollectiveRecord> pop_collective_recorder();
void record_collective(CollectiveRecord record);
bool recording_collectives();  // whether a recorder is open
// Runs collective `prim` over every device of `mesh` (`in[pos]`: the operands
// of the device at mesh position `pos`) and, while a recorder or the profiler
// is open, records what its communication model (Primitive::comm) says it
// moved, unless it moves nothing.
std::vector<Tensors> run_collective(const Primitive& prim, const MeshContext& mesh,
                                    const std::vector<Tensors>& in, const Params& params,
                                    const Avals& out);

// While one is open on a thread, the all-reduces (psum/pmax/pmin records)
// recorded there are held and merged with later ones over the same devices,
// as XLA's all-reduce combiner merges independent all-reduces into one; an
// all-reduce recorded while `dependent()` (its operand needs a held result)
// first records what is held. Closing records the rest.
class AllReduceCombiner {
 public:
  AllReduceCombiner();
  ~AllReduceCombiner();
  AllReduceCombiner(const AllReduceCombiner&) = delete;
  AllReduceCombiner& operator=(const AllReduceCombiner&) = delete;
  void set_dependent(bool dependent) { dependent_ = dependent; }
  int64_t holds() const { return holds_; }      // all-reduces held so far
  int64_t flushes() const { return flushes_; }  // times held ones were recorded
  bool hold(CollectiveRecord& record);          // false: not an all-reduce, record it
  void flush();

 private:
  std::vector<CollectiveRecord> held_;
  AllReduceCombiner* outer_;
  bool dependent_ = false;
  int64_t holds_ = 0, flushes_ = 0;
};

// `x` laid out over `mesh` as `spec` (any axes, Explicit or Auto), typed
// `out`: a no-op when it already is; otherwise each device's new block is
// taken from its own block where it can (a view: a slice moves nothing) and
// copied from the other devices' blocks where it must (an all-gather or
// all-to-all, recorded).
ArrayPtr reshard_array(const ArrayPtr& x, const MeshPtr& mesh, const Spec& spec, const Aval& out);

// Applies `prim` to global arrays typed `in` (the program's types; an
// array's own layout may differ and is resharded as needed).
std::vector<ArrayPtr> apply_primitive(const Primitive& prim, const std::vector<ArrayPtr>& args,
                                      const Avals& in, const Params& params, const Avals& out);

}  // namespace meshsim
