// The arrays a program's constants stand for, typed as the program types them.
#pragma once
#include "meshsim/core/array.h"
#include "meshsim/ir/program.h"

namespace meshsim {

// Constant `i` of `program` as an array of its recorded type: laid out over its mesh when
// the type is split over Explicit axes (a sharded array closed over by a differentiated or
// batched function keeps its sharding, so the rules applied to it see JAX's type).
ArrayPtr const_array(const Program& program, size_t i);

}  // namespace meshsim
