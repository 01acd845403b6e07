#include "meshsim/sharding/propagator.h"

#include <algorithm>
#include <set>

// Operations that regroup or resize dims: reshapes (a dim made of several
// factors) and concatenate, pad, slice and the cumulative scans (Shardy's
// permutation factors).

namespace meshsim::propagation {

// Shardy's reshape rule: a dim that a reshape splits into several (or merges
// from several) is made of one factor per part, major first, so each part
// takes the axes of the whole dim that fall to it (`(4,)` over ('Y', 'Z')
// split to `(2, 2)` is ('Y', 'Z') on the parts, a local reshape). The factor
// map links the whole dim with its group's first part; the later parts get
// factors of their own here. For primitives that regroup dims (Primitive::regroups_dims).
void add_reshape_parts(const Equation& e, const Avals& in, const Avals& out, Site& s) {
  if (!e.prim->regroups_dims || in.size() != 1 || out.size() != 1) return;
  const Shape &a = in[0].shape, &b = out[0].shape;
  std::vector<int>&ma = s.map.in[0], &mb = s.map.out[0];
  for (size_t i = 0; i < a.size(); ++i) {
    if (ma[i] == kNoFactor) continue;
    const size_t j = std::find(mb.begin(), mb.end(), ma[i]) - mb.begin();
    if (j == mb.size() || a[i] == b[j]) continue;
    // The one dim on one side, its parts on the other.
    const bool split = a[i] > b[j];
    const Shape& parts_shape = split ? b : a;
    std::vector<int>& parts_map = split ? mb : ma;
    const size_t whole = split ? i : j, first = split ? j : i;
    const int64_t total = split ? a[i] : b[j];
    std::vector<int> factors;
    std::vector<int64_t> sizes;
    int64_t product = 1;
    for (size_t k = first; k < parts_shape.size() && product < total; ++k) {
      product *= parts_shape[k];
      if (parts_shape[k] == 1) continue;
      if (k != first) {
        if (parts_map[k] != kNoFactor) return;
        parts_map[k] = s.map.num_factors++;
      }
      factors.push_back(parts_map[k]);
      sizes.push_back(parts_shape[k]);
    }
    if (product != total) return;
    s.compound[{split ? 0 : 1, whole}] = {std::move(factors), std::move(sizes)};
  }
}

// Shardy's permutation factors: a dimension that concatenate or slice changes
// in size keeps its sharding from operand to result, but the operation
// needs it whole in the operands (gathered), and its result is sliced
// locally to the propagated layout, as XLA partitions a concatenate; unless
// the primitive's local plan runs on the blocks laid out so (a slice whose
// result blocks lie within the devices' own operand blocks). For primitives
// declaring it (Primitive::unmapped_dims_keep_sharding).
void add_permutation_factors(const Equation& e, const Avals& in, const Avals& out, Site& s) {
  s.permutation.assign(s.map.num_factors, false);
  if (!e.prim->unmapped_dims_keep_sharding || out.size() != 1) return;
  const size_t rank = out[0].shape.size();
  for (size_t d = 0; d < rank; ++d) {
    if (s.map.out[0][d] != kNoFactor) continue;
    // Scalar operands (a pad's padding value) have no dims to align.
    bool aligned = true;
    for (size_t i = 0; i < in.size(); ++i)
      aligned &= in[i].shape.empty() || (in[i].shape.size() == rank && s.map.in[i][d] == kNoFactor);
    if (!aligned) continue;
    const int f = s.map.num_factors++;
    s.permutation.push_back(true);
    s.map.out[0][d] = f;
    for (size_t i = 0; i < in.size(); ++i)
      if (!in[i].shape.empty()) s.map.in[i][d] = f;
  }
}

void Propagator::retile_concatenated(const Site& s, std::vector<Spec>& operands, Spec& result) const {
  const int out = s.out_vars[0];
  const Spec& value = spec_[out];
  const Shape& shape = avals_[out].shape;
  for (size_t d = 0; d < shape.size() && d < value.size(); ++d) {
    if (value[d].empty() || !result[d].empty()) continue;
    const int64_t n = entry_size(value[d]);
    for (size_t e = 0; e < shape.size(); ++e) {
      if (e == d) continue;
      bool divides = (shape[e] / entry_size(result[e])) % n == 0;
      for (size_t i = 0; i < operands.size() && divides; ++i) {
        const Shape& in = avals_[s.in_vars[i]].shape;
        divides = operands[i][e] == result[e] && (in[e] / entry_size(operands[i][e])) % n == 0;
      }
      if (!divides) continue;
      for (Spec& o : operands) o[e].insert(o[e].end(), value[d].begin(), value[d].end());
      result[e].insert(result[e].end(), value[d].begin(), value[d].end());
      return;
    }
  }
}

std::vector<Spec> Propagator::kept_uneven(const Site& s, const std::vector<Spec>& operands) const {
  std::vector<Spec> kept = operands;
  for (size_t i = 0; i < s.num_in; ++i) {
    const std::vector<int>& dims = *s.dims[i];
    const Spec& value = spec_[s.in_vars[i]];
    std::set<std::string> used;
    for (const AxisNames& e : kept[i]) used.insert(e.begin(), e.end());
    for (size_t d = 0; d < dims.size() && d < value.size(); ++d) {
      if (dims[d] == kNoFactor || !s.permutation[dims[d]] || !kept[i][d].empty()) continue;
      bool free = true;
      for (const std::string& a : value[d]) free = free && !used.count(a);
      if (!free) continue;
      kept[i][d] = value[d];
      used.insert(value[d].begin(), value[d].end());
    }
  }
  return kept;
}

std::vector<Spec> Propagator::computed_layouts(const Site& s) const {
  std::vector<Spec> layouts;
  bool differs = false;
  const size_t num_in = s.num_in;
  for (size_t t = num_in; t < s.vars.size(); ++t) {
    Spec spec = spec_[s.vars[t]];
    const std::vector<int>& dims = *s.dims[t];
    for (size_t d = 0; d < dims.size() && d < spec.size(); ++d)
      if (dims[d] != kNoFactor && s.permutation[dims[d]] && !spec[d].empty()) {
        spec[d].clear();
        differs = true;
      }
    layouts.push_back(std::move(spec));
  }
  if (!differs) layouts.clear();
  return layouts;
}

}  // namespace meshsim::propagation
