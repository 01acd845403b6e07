#include "meshsim/ir/program_consts.h"

#include <algorithm>

namespace meshsim {

ArrayPtr const_array(const Program& program, size_t i) {
  const Aval& aval = program.avals[program.constvars[i]];
  const Tensor& value = program.consts[i];
  const bool split = aval.mesh && aval.unreduced.empty() &&
                     std::any_of(aval.spec.begin(), aval.spec.end(), [](const AxisNames& e) { return !e.empty(); });
  if (!split) return Array::from_tensor(value, aval.weak_type);
  auto sharding = std::make_shared<Sharding>();
  sharding->mesh = aval.mesh;
  sharding->spec = aval.spec;
  return shard_array(value, std::move(sharding), aval.weak_type);
}

}  // namespace meshsim
