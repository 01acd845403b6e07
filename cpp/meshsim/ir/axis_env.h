// The axis environment: which mesh axes are manual (bound by an enclosing
// shard_map) while its body is traced. Collectives look their axes up here;
// VMA typing is on only inside a shard_map traced with check_vma=True.
#pragma once
#include <string>
#include <vector>

#include "meshsim/core/mesh.h"

namespace meshsim {

struct AxisEnv {
  MeshPtr mesh;            // the shard_map's mesh
  AxisNames manual_axes;   // in mesh order
  bool check_vma = true;

  bool is_manual(const std::string& name) const;
};

// Scopes nest like the shard_maps that open them (per thread, like traces).
void push_axis_env(AxisEnv env);
void pop_axis_env();
const AxisEnv* current_axis_env();  // null outside any shard_map body
bool vma_checking();               // inside a shard_map body with check_vma=True

// Size of the manual axis `name` (product for several); raises NameError
// naming `op` when the axis is not bound by an enclosing shard_map.
int64_t bound_axis_size(const AxisNames& names, const std::string& op);

}  // namespace meshsim
