// Installs the execution layers into binding (ir/hooks.h): the sharding rules
// that type results and the eager interpreter. Called once at import, before
// anything is bound.
#pragma once

namespace meshsim {

void install_runtime_hooks();

}  // namespace meshsim
