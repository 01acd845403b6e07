#include "meshsim/ir/primitive.h"
#include "meshsim/primitives/families.h"

namespace meshsim {

void register_random_primitives() {}

}  // namespace meshsim
