#include "meshsim/sharding/propagator.h"

#include <algorithm>
#include <set>

#include "meshsim/core/sub_axes.h"

// Contracted factors (dot_general, convolutions, reductions): whether XLA
// computes them split (the partial results all-reduced) or whole.

namespace meshsim::propagation {

AxisNames Propagator::split_over_idle_axes(const Site& s, int f, const std::vector<AxisNames>& fs,
                                           int64_t size) const {
  std::set<std::string> used;
  for (const AxisNames& axes : fs) used.insert(axes.begin(), axes.end());
  int64_t split = 0;
  size_t split_operand = 0;
  for (size_t t = 0; t < s.num_in; ++t) {
    const std::vector<int>& dims = *s.dims[t];
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] != f || spec_[s.vars[t]][d].empty()) continue;
      if (split) return {};  // more than one operand splits it
      for (const std::string& a : spec_[s.vars[t]][d])
        if (!used.count(a)) return {};
      split = entry_size(spec_[s.vars[t]][d]);
      split_operand = t;
    }
  }
  AxisNames idle;
  for (const std::string& a : mesh_.axis_names)
    if (!overlaps_any(mesh_, used, a) && mesh_.axis_size(a) > 1) idle.push_back(a);
  const int64_t n = entry_size(idle);
  if (!split || idle.empty() || n <= split || n % split != 0 || size % n != 0) return {};
  std::vector<AxisNames> moved = fs;
  moved[f] = idle;
  const int64_t gather = block_bytes(s, split_operand, moved) * (n - 1);
  int64_t reduce = 0;
  for (size_t t = s.num_in; t < s.vars.size(); ++t) reduce += 2 * block_bytes(s, t, moved) * (n - 1) / n;
  return reduce <= gather ? idle : AxisNames{};
}

bool Propagator::uses_any(const Spec& spec, const AxisNames& axes) {
  for (const AxisNames& e : spec)
    for (const std::string& a : e)
      if (std::find(axes.begin(), axes.end(), a) != axes.end()) return true;
  return false;
}

int64_t Propagator::block_bytes(const Site& s, size_t t, const std::vector<AxisNames>& fs) const {
  const Aval& a = avals_[s.vars[t]];
  const std::vector<int>& dims = *s.dims[t];
  int64_t n = static_cast<int64_t>(itemsize(a.dtype));
  for (size_t d = 0; d < dims.size(); ++d)
    n *= a.shape[d] / (dims[d] == kNoFactor ? 1 : entry_size(joined(s, t, d, fs)));
  return n;
}

AxisNames Propagator::contracted_layout(const Site& s, int f, const std::vector<AxisNames>& fs,
                                        bool planning) const {
  const size_t num_in = s.num_in;
  bool differs = false;
  int64_t gather = 0;
  std::set<std::string> operand_axes;
  for (size_t t = 0; t < num_in; ++t) {
    const std::vector<int>& dims = *s.dims[t];
    for (size_t d = 0; d < dims.size(); ++d) {
      const AxisNames& axes = spec_[s.vars[t]][d];
      operand_axes.insert(axes.begin(), axes.end());
      if (dims[d] != f) continue;
      const int v = s.vars[t];
      // An open operand laid out over a prefix of the factor's axes (or not
      // along it) gains the rest where its other dims leave them free.
      const AxisNames rest(fs[f].begin() + std::min(axes.size(), fs[f].size()), fs[f].end());
      const bool grows = is_prefix(axes, fs[f]) && !fixed_[v] && computed_[v] && !uses_any(spec_[v], rest);
      differs |= axes != fs[f] && (planning || !grows);
      if (axes.empty()) continue;
      std::vector<AxisNames> own = fs;
      own[f] = axes;
      gather += block_bytes(s, t, own) * (entry_size(axes) - 1);
    }
  }
  if (!differs) return fs[f];
  for (size_t t = num_in; t < s.vars.size(); ++t)
    for (const AxisNames& axes : spec_[s.vars[t]])
      for (const std::string& a : axes)
        if (std::find(fs[f].begin(), fs[f].end(), a) != fs[f].end()) return {};
  int64_t covered = 1;
  for (const std::string& a : operand_axes) covered *= mesh_.axis_size(a);
  if (covered != mesh_.size()) return {};
  const int64_t n = entry_size(fs[f]);
  int64_t reduce = 0;
  for (size_t t = num_in; t < s.vars.size(); ++t) reduce += 2 * block_bytes(s, t, fs) * (n - 1) / n;
  return gather < reduce ? AxisNames{} : fs[f];
}

}  // namespace meshsim::propagation
