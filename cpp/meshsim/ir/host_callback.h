// Calls from a running program into the host language (Python): jax.debug.callback,
// jax.debug.print and jax.pure_callback. The bindings install the caller; a primitive's
// `callback` param is the id under which the Python side keeps the function.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "meshsim/ir/primitive.h"

namespace meshsim {

// Where a call runs: one device of a shard_map body (its id and mesh coordinates), or a
// program over global values (device -1, no coordinates).
struct HostCallSite {
  int device = -1;
  std::vector<int64_t> coords;
};

using HostCaller = std::function<Tensors(int64_t callback, const Tensors& args, const HostCallSite& site,
                                         const Avals& out)>;
void set_host_caller(HostCaller caller);

// Rules the host language computes for a `host_rule_collective` (a collective over a vmapped
// axis: its batching sums, gathers or permutes along the batch dimension, and its VJP binds the
// transposed collective). `rule` is the id under which the Python side keeps them.
struct HostRules {
  std::function<Batched(int64_t rule, const Values& in, const BatchDims& dims, int64_t size)> batch;
  std::function<Cotangents(int64_t rule, const Values& in, const Cotangents& ct)> vjp;
};
void set_host_rules(HostRules rules);

}  // namespace meshsim
