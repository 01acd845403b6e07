// What the primitives that call a sub-program on their operands share
// (remat2 and custom_vjp_call in autodiff.cpp, jit in jit_call.cpp): checking
// the operands against the program's inputs, running it, and batching them at
// the front.
#pragma once
#include "meshsim/ir/program.h"

namespace meshsim {

// The avals a call of `program` on in[first, first + count) returns, after
// checking those operands' types against its inputs (errors name `prim`).
Avals call_avals(const char* prim, const Program& program, const Avals& in, size_t first, size_t count);

// Which of operands [first, first + count) carry a batch dimension.
std::vector<bool> batched_flags(const BatchDims& dims, size_t first, size_t count);

// The operands with the batched ones' batch dimension moved to the front.
Values at_front(const BatchArgs& a, const std::vector<bool>& batched);

// A higher-order primitive `name` running the program in its param `param` on
// all its operands: its kind, abstract eval, kernel, mesh call, VMA, sharding
// rule, factor map and local plan (remat2, jit). The caller adds the rest.
Primitive program_call(const char* name, const char* param);

// The nested jit (jit_call.cpp), registered with the other families.
void register_jit_primitive();

}  // namespace meshsim
