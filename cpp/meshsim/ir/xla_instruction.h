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

// The all-reduce collective declared to combine a local plan's partial results
// by `reduction` ("sum", "max" or "min": Primitive::partials_reduction, set
// where it is registered), so that neither the sharded executor nor the
// all-reduce combiner names a primitive. Raises std::logic_error when none is.
const Primitive& partials_all_reduce(const std::string& reduction);

}  // namespace meshsim
