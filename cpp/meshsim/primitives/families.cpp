#include "meshsim/primitives/families.h"

#include <mutex>

namespace meshsim {

void register_all_primitives() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto* register_family : kPrimitiveFamilies) register_family();
  });
}

}  // namespace meshsim
