// vmap's spmd_axis_name: the mesh axes a batch is split over.
//
// While a vmap with spmd_axis_name applies its program (batch_eval), the
// batching rules that name layouts (sharding_constraint, shard_map) put these
// axes at the batch dimension, as JAX does; without it they leave the batch
// dimension unsharded. Scopes nest like the vmaps that open them (per thread).
#pragma once
#include "meshsim/core/mesh.h"

namespace meshsim {

// The innermost vmap's spmd axes; empty when it has none.
const AxisNames& spmd_axis_names();

struct SpmdAxisScope {
  explicit SpmdAxisScope(AxisNames axes);
  ~SpmdAxisScope();
  SpmdAxisScope(const SpmdAxisScope&) = delete;
  SpmdAxisScope& operator=(const SpmdAxisScope&) = delete;
};

}  // namespace meshsim
