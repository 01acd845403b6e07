#include "meshsim/transforms/spmd_axes.h"

#include <vector>

namespace meshsim {
namespace {
thread_local std::vector<AxisNames> scopes;
}  // namespace

const AxisNames& spmd_axis_names() {
  static const AxisNames none;
  return scopes.empty() ? none : scopes.back();
}

SpmdAxisScope::SpmdAxisScope(AxisNames axes) { scopes.push_back(std::move(axes)); }
SpmdAxisScope::~SpmdAxisScope() { scopes.pop_back(); }

}  // namespace meshsim
