#include "meshsim/runtime/sub_program_calls.h"

namespace meshsim {

namespace {
thread_local PartitionedSubPrograms* t_partitioned = nullptr;
}  // namespace

PartitionedSubPrograms::PartitionedSubPrograms(std::map<const Program*, SubProgramCall> calls)
    : calls_(std::move(calls)), outer_(t_partitioned) {
  t_partitioned = this;
}

PartitionedSubPrograms::~PartitionedSubPrograms() { t_partitioned = outer_; }

const SubProgramCall* PartitionedSubPrograms::find(const Program* program) {
  for (const PartitionedSubPrograms* s = t_partitioned; s; s = s->outer_) {
    const auto it = s->calls_.find(program);
    if (it != s->calls_.end()) return &it->second;
  }
  return nullptr;
}

}  // namespace meshsim
