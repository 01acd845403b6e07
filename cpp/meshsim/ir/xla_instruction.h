// The XLA instruction a collective lowers to ("all-reduce", "all-gather",
// "reduce-scatter", "all-to-all", "ragged-all-to-all", "collective-permute",
// "collective-broadcast"), a field of the collective's Primitive set where it
// is registered, next to its communication model. Compiled text names collectives by it, and the
// step-time model picks a platform's algorithm by it (NCCL's tree for an
// all-reduce, direct exchanges for an all-to-all), so neither keeps a list of
// primitive names.
#pragma once
#include <optional>
#include <string>

#include "meshsim/ir/primitive.h"

namespace meshsim {

// Declares that `prim` lowers to `instruction` (Primitive::xla_instruction);
// returns `prim` so that the declaration chains into register_primitive, whose
// validate() refuses an instruction on anything but a collective.
Primitive& lowers_to(Primitive& prim, std::string instruction);
// The instruction `primitive_name` declared, or nullopt (not a collective that
// moves data: axis_index, host callbacks, every local primitive).
std::optional<std::string> xla_instruction(const std::string& primitive_name);

// An all-reduce's reduction ("sum", "max" or "min", as LocalPlan::reduce_op
// spells them; XLA's `to_apply`). `combines_partials` declares, where the
// collective is registered, that `prim` (an "all-reduce") is the one that
// combines the partial results a local plan leaves over mesh axes with that
// reduction: the sharded executor runs and records it for them, and an open
// AllReduceCombiner merges its records (runtime/sharded.h), so neither names a
// primitive. One collective per reduction; returns `prim` to chain into
// register_primitive.
Primitive& combines_partials(Primitive& prim, std::string reduction);
// The collective declared for `reduction`; raises std::logic_error when none is.
const Primitive& partials_all_reduce(const std::string& reduction);
// Whether `primitive_name` was declared to combine partial results.
bool is_partials_all_reduce(const std::string& primitive_name);

}  // namespace meshsim
