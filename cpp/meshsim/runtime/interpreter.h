// Runs programs and single primitives.
//
// A top-level program (what `jit` traced) runs over global arrays: most
// primitives see the whole value as one tensor, primitives with an
// `array_kernel` (shard_map) see the arrays' shardings. A shard_map body runs
// per device on local blocks (runtime/mesh_executor.h).
#pragma once
#include "meshsim/ir/program.h"

namespace meshsim {

// Runs one primitive's kernel and checks the results have the promised shapes.
Tensors run_primitive(const Primitive& prim, const Tensors& args, const Params& params,
                      const Avals& out_avals);

// For each variable, the index of the last equation reading it (the number of
// equations for program outputs, -1 if never read): buffers go back early.
std::vector<int> last_uses(const Program& program);

// Runs a whole program on one device's tensors.
Tensors run_program(const Program& program, const Tensors& args);

// Runs a top-level program over global arrays.
std::vector<ArrayPtr> run_global_program(const Program& program, const std::vector<ArrayPtr>& args);

}  // namespace meshsim
