#include "meshsim/runtime/hooks.h"

#include "meshsim/ir/hooks.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/sharding/rules.h"

namespace meshsim {

void install_runtime_hooks() {
  set_sharding_typing(apply_sharding_rule);
  set_eager_application(apply_eagerly);
}

}  // namespace meshsim
