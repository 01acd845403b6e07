// Runs programs and single primitives on one device's local blocks.
#pragma once
#include "meshsim/ir/program.h"

namespace meshsim {

// Runs one primitive's kernel and checks the results have the promised shapes.
Tensors run_primitive(const Primitive& prim, const Tensors& args, const Params& params,
                      const Avals& out_avals);

// Runs a whole program. Intermediate tensors are released after their last use.
Tensors run_program(const Program& program, const Tensors& args);

}  // namespace meshsim
