#include "meshsim/ir/primitive.h"
#include "meshsim/primitives/families.h"

namespace meshsim {

void register_sorting_primitives() {}

}  // namespace meshsim
