#include "meshsim/ir/axis_env.h"

#include <algorithm>

#include "meshsim/core/error.h"

namespace meshsim {
namespace {
thread_local std::vector<AxisEnv> g_envs;
}

bool AxisEnv::is_manual(const std::string& name) const {
  return std::find(manual_axes.begin(), manual_axes.end(), name) != manual_axes.end();
}

void push_axis_env(AxisEnv env) { g_envs.push_back(std::move(env)); }
void pop_axis_env() {
  if (!g_envs.empty()) g_envs.pop_back();
}
const AxisEnv* current_axis_env() { return g_envs.empty() ? nullptr : &g_envs.back(); }
bool vma_checking() { return !g_envs.empty() && g_envs.back().check_vma; }

int64_t bound_axis_size(const AxisNames& names, const std::string& op) {
  const AxisEnv* env = current_axis_env();
  int64_t size = 1;
  for (const auto& name : names) {
    if (!env || !env->is_manual(name))
      fail<NameError>("Found an unbound axis name: ", name, ". To fix this, please call ", op,
                      " under `jax.shard_map`.");
    size *= env->mesh->axis_size(name);
  }
  return size;
}

}  // namespace meshsim
