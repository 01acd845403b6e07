#include "meshsim/sharding/propagator.h"

#include <algorithm>
#include <optional>
#include <set>

#include "meshsim/core/sub_axes.h"

// Contracted factors (dot_general, convolutions, reductions): whether XLA
// computes them split (the partial results all-reduced) or whole.

namespace meshsim::propagation {

AxisNames Propagator::split_over_idle_axes(const Site& s, int f, const std::vector<AxisNames>& fs,
                                           int64_t size) const {
  std::set<std::string> used;
  for (const AxisNames& axes : fs) used.insert(axes.begin(), axes.end());
  // A dot's batch factors (every value holds them): where one of them takes
  // the operand's axes, XLA re-tiles the operand to the batch blocks and gathers.
  std::vector<size_t> holders(fs.size(), 0);
  if (s.eqn && s.eqn->prim->name == "dot_general")
    for (size_t t = 0; t < s.vars.size(); ++t)
      for (int g : std::set<int>(s.dims[t]->begin(), s.dims[t]->end()))
        if (g != kNoFactor) ++holders[g];
  int64_t split = 0;
  size_t split_operand = 0;
  for (size_t t = 0; t < s.num_in; ++t) {
    const std::vector<int>& dims = *s.dims[t];
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] != f || spec_[s.vars[t]][d].empty()) continue;
      if (split) return {};  // more than one operand splits it
      for (const std::string& a : spec_[s.vars[t]][d]) {
        if (!used.count(a)) return {};
        for (size_t g = 0; g < fs.size(); ++g)
          if (holders[g] == s.vars.size() && std::count(fs[g].begin(), fs[g].end(), a)) return {};
      }
      split = entry_size(spec_[s.vars[t]][d]);
      split_operand = t;
    }
  }
  AxisNames idle;
  for (const std::string& a : mesh_.axis_names)
    if (!overlaps_any(mesh_, used, a) && mesh_.axis_size(a) > 1) idle.push_back(a);
  const int64_t n = entry_size(idle);
  if (!split || idle.empty() || n < split || n % split != 0 || size % n != 0) return {};
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

std::optional<AxisNames> Propagator::grouped_on_free_dims(const Site& s, int f) const {
  if (!s.eqn || s.eqn->prim->name != "dot_general" || s.num_in != 2 || s.vars.size() != 3 || !s.compound.empty())
    return std::nullopt;
  // Per factor: which values hold it (bit 0 the lhs, 1 the rhs, 2 the result).
  std::vector<int> holders(s.map.num_factors, 0);
  for (size_t t = 0; t < 3; ++t)
    for (int g : *s.dims[t])
      if (g != kNoFactor) holders[g] |= 1 << t;
  if (holders[f] != 3) return std::nullopt;
  for (int g = 0; g < s.map.num_factors; ++g)
    if (g != f && holders[g] == 3) return std::nullopt;  // one contracted dim only
  auto axes_of = [&](size_t t, int g) {
    const std::vector<int>& dims = *s.dims[t];
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d] == g) return spec_[s.vars[t]][d];
    return AxisNames{};
  };
  // The result is split only along free dims of one operand, laid out alike there.
  int matching = -1;
  AxisNames group_axes;
  const std::vector<int>& out_dims = *s.dims[2];
  for (size_t d = 0; d < out_dims.size(); ++d) {
    const AxisNames& axes = spec_[s.vars[2]][d];
    if (axes.empty()) continue;
    const int g = out_dims[d];
    if (holders[g] != 5 && holders[g] != 6) return std::nullopt;
    const int t = holders[g] == 5 ? 0 : 1;
    if ((matching >= 0 && matching != t) || axes_of(t, g) != axes) return std::nullopt;
    matching = t;
    group_axes.insert(group_axes.end(), axes.begin(), axes.end());
  }
  if (matching < 0) return std::nullopt;
  const size_t other = 1 - static_cast<size_t>(matching);
  const Spec& o = spec_[s.vars[other]];
  std::set<std::string> o_used;
  for (const AxisNames& e : o) o_used.insert(e.begin(), e.end());
  bool shares = false;
  for (const std::string& a : group_axes) shares = shares || overlaps_any(mesh_, o_used, a);
  if (!shares) return std::nullopt;  // replicated over the groups' axes: brought to each group as it is
  const AxisNames m_f = axes_of(static_cast<size_t>(matching), f), o_f = axes_of(other, f);
  if (entry_size(m_f) == entry_size(o_f) && entry_size(m_f) > 1) return std::nullopt;  // grouped on the contraction
  const int64_t groups = entry_size(group_axes);
  int64_t o_blocks = 1;
  for (const AxisNames& e : o) o_blocks *= entry_size(e);
  const int64_t replicas = mesh_.size() / o_blocks;
  AxisNames unused;
  for (const std::string& a : mesh_.axis_names)
    if (mesh_.axis_size(a) > 1 && !overlaps_any(mesh_, o_used, a)) unused.push_back(a);
  if (replicas > 1 && replicas % groups == 0) {
    if (entry_size(unused) != replicas) return std::nullopt;
    const std::set<std::string> in_groups(group_axes.begin(), group_axes.end());
    for (size_t i = o.size(); i-- > 0;) {
      if (o[i].size() != in_groups.size() ||
          !std::all_of(o[i].begin(), o[i].end(), [&](const std::string& a) { return in_groups.count(a) > 0; }))
        continue;
      // Dim i takes the unused axes; within a group the result is whole.
      if (avals_[s.vars[other]].shape[i] % replicas != 0) return std::nullopt;
      const std::vector<int>& o_dims = *s.dims[other];
      const AxisNames o_f_grouped = o_dims[i] == f ? unused : o_f;
      if (!m_f.empty() && entry_size(m_f) == entry_size(o_f_grouped)) {
        // The smaller operand is moved to the larger's layout.
        const bool lhs_smaller = elements(avals_[s.vars[0]]) < elements(avals_[s.vars[1]]);
        return (static_cast<size_t>(matching) == 0) != lhs_smaller ? m_f : o_f_grouped;
      }
      bool m_whole_in_group = true;  // its split dims hold the groups' axes only
      for (const AxisNames& e : spec_[s.vars[static_cast<size_t>(matching)]])
        for (const std::string& a : e) m_whole_in_group = m_whole_in_group && in_groups.count(a) > 0;
      if (m_whole_in_group && entry_size(o_f_grouped) == mesh_.size() / groups &&
          elements(avals_[s.vars[other]]) > elements(avals_[s.vars[2]]) / groups)
        return o_f_grouped;
      return AxisNames{};
    }
    return std::nullopt;
  }
  // Unmodelled groupings of the other operand: along dims holding the
  // groups' axes only, or along its contracted or free dims.
  std::set<std::string> grouping;
  for (const AxisNames& e : o)
    if (!e.empty() && std::all_of(e.begin(), e.end(), [&](const std::string& a) {
          return std::find(group_axes.begin(), group_axes.end(), a) != group_axes.end();
        }))
      grouping.insert(e.begin(), e.end());
  if (grouping.size() == group_axes.size()) return std::nullopt;
  int64_t o_free = 1;
  const std::vector<int>& o_dims = *s.dims[other];
  for (size_t d = 0; d < o_dims.size(); ++d)
    if (o_dims[d] != kNoFactor && holders[o_dims[d]] != 3 && holders[o_dims[d]] != 7) o_free *= entry_size(o[d]);
  if (entry_size(o_f) == groups && o_free == 1) return std::nullopt;
  if (groups == o_free && entry_size(m_f) == entry_size(o_f)) return std::nullopt;
  return m_f;
}

AxisNames Propagator::contracted_layout(const Site& s, int f, const std::vector<AxisNames>& fs,
                                        bool planning) const {
  if (planning)
    if (const std::optional<AxisNames> grouped = grouped_on_free_dims(s, f)) return *grouped;
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
