#include "meshsim/primitives/families.h"

#include <mutex>

#include "meshsim/primitives/program_calls.h"

namespace meshsim {

void register_all_primitives() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto* register_family : kPrimitiveFamilies) register_family();
    register_jit_primitive();
  });
}

}  // namespace meshsim
