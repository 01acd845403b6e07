// Calls XLA inlines when it compiles a program. JAX prints a nested jit as one
// equation holding the called program; XLA compiles that program's operations
// in place, fusing and partitioning across the call. A primitive declares here,
// where it is registered, that its equations are such calls; the executors run
// a copy of a traced program with them inlined (the printed program stays as
// traced), so a nested call executes as its body written in place would.
#pragma once
#include <optional>
#include <string>

#include "meshsim/ir/program.h"

namespace meshsim {

// Equations of primitive `prim` call the program in their param `param` on
// their operands. Declared at registration, before any program runs.
void inline_when_compiled(const std::string& prim, const std::string& param);

// `program` with every such call replaced by the called program's equations
// (in its sub-programs too: loop bodies, branches, shard_map bodies), or
// nullopt when it holds none.
std::optional<Program> with_calls_inlined(const Program& program);

}  // namespace meshsim
