// What binding a primitive needs from the layers above ir/ (sharding types,
// eager execution), reached through hooks those layers install at import
// (runtime/hooks.h), so that no include runs up from ir/.
#pragma once
#include <functional>
#include <vector>

#include "meshsim/ir/primitive.h"

namespace meshsim {

// Types the results' shardings over Explicit mesh axes from the operands'
// (sharding/rules.h's apply_sharding_rule); raises ShardingTypeError.
using ShardingTyping = std::function<void(const Primitive& prim, const Avals& in, const Params& params,
                                          Avals& out)>;
// Runs `prim` at once on concrete arrays typed `in` (a bind with no trace
// open): runtime/interpreter.h's apply_eagerly.
using EagerApplication = std::function<std::vector<ArrayPtr>(
    const Primitive& prim, const std::vector<ArrayPtr>& args, const Avals& in, const Params& params,
    const Avals& out)>;

void set_sharding_typing(ShardingTyping typing);
void set_eager_application(EagerApplication apply);

}  // namespace meshsim
