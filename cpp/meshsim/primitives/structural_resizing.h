// slice, concatenate, stack, unstack and pad (structural_resizing.cpp), registered by
// register_structural_primitives between rev and copy.
#pragma once

namespace meshsim {
void register_resizing_primitives();
}  // namespace meshsim
