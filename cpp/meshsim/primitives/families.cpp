#include "meshsim/primitives/families.h"

#include <mutex>
#include <vector>

#include "meshsim/primitives/program_calls.h"

namespace meshsim {
namespace {

// Filled while the module loads (static initialisers), before any call of
// register_all_primitives.
std::vector<void (*)()>& added_families() {
  static std::vector<void (*)()> families;
  return families;
}

}  // namespace

bool add_primitive_family(void (*register_family)()) {
  added_families().push_back(register_family);
  return true;
}

void register_all_primitives() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto* register_family : kPrimitiveFamilies) register_family();
    for (auto* register_family : added_families()) register_family();
    register_jit_primitive();
  });
}

}  // namespace meshsim
