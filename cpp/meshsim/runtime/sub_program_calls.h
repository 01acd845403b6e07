// Control-flow equations whose sub-programs run partitioned over Auto mesh
// axes (a scan whose body communicates on every iteration, as XLA keeps the
// loop sharded): the primitive's own loop (its `mesh_call`) runs, and each
// call of a sub-program it makes through run_on_mesh is answered by running
// that sub-program partitioned on global arrays instead.
#pragma once
#include <functional>
#include <map>
#include <vector>

#include "meshsim/ir/program.h"
#include "meshsim/runtime/sharded.h"

namespace meshsim {

// One call of a sub-program: every device's inputs (`in[pos]`) to every
// device's outputs.
using SubProgramCall = std::function<std::vector<Tensors>(std::vector<Tensors> in)>;

// While one is open on a thread, run_on_mesh runs the sub-programs it names
// by their calls. Scopes nest (a loop in a loop's body).
class PartitionedSubPrograms {
 public:
  explicit PartitionedSubPrograms(std::map<const Program*, SubProgramCall> calls);
  ~PartitionedSubPrograms();
  PartitionedSubPrograms(const PartitionedSubPrograms&) = delete;
  PartitionedSubPrograms& operator=(const PartitionedSubPrograms&) = delete;
  // The call running `program` in the innermost open scope; null when none.
  static const SubProgramCall* find(const Program* program);

 private:
  std::map<const Program*, SubProgramCall> calls_;
  PartitionedSubPrograms* outer_;
};

// While one is open on a thread, the collectives recorded there are those of
// sub-program calls (`begin_call` says which program each call runs), and
// only the first `copies` calls of each sub-program have their collectives
// recorded, when the scope closes: a loop's collectives as XLA's program
// text holds them, once in the loop's body (or once per unrolled copy)
// whatever the iteration count. The profiler's
// timeline still shows every execution.
class SubProgramRecords {
 public:
  SubProgramRecords();
  ~SubProgramRecords();  // records what it kept (runtime/sharded.cpp)
  SubProgramRecords(const SubProgramRecords&) = delete;
  SubProgramRecords& operator=(const SubProgramRecords&) = delete;
  void begin_call(const Program* program, int64_t copies) { kept_call_ = ++calls_[program] <= copies; }
  // The innermost open scope on this thread; null when none.
  static SubProgramRecords* current();
  // Takes `record`: kept when it comes from one of a sub-program's first calls.
  void take(const CollectiveRecord& record) {
    if (kept_call_) kept_.push_back(record);
  }

 private:
  std::map<const Program*, int64_t> calls_;
  bool kept_call_ = true;
  std::vector<CollectiveRecord> kept_;
  SubProgramRecords* outer_;
};

}  // namespace meshsim
