#include "meshsim/sharding/factors.h"

#include <algorithm>

#include "meshsim/sharding/rules.h"

namespace meshsim {

FactorMap blank_factors(const Avals& in, const Avals& out) {
  FactorMap m;
  for (const Aval& a : in) m.in.emplace_back(a.shape.size(), kNoFactor);
  for (const Aval& a : out) m.out.emplace_back(a.shape.size(), kNoFactor);
  return m;
}

FactorMap keep_dims_factors(const Avals& in, const Avals& out, const IntList& whole,
                            const IntList& reduced, bool contracted) {
  FactorMap m = blank_factors(in, out);
  const int64_t ndim = in[0].ndim();
  std::vector<int> factor(ndim, kNoFactor);
  for (int64_t d = 0; d < ndim; ++d)
    if (!in_list(whole, d) && (contracted || !in_list(reduced, d))) factor[d] = m.num_factors++;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].shape == in[0].shape) m.in[i] = factor;
  for (auto& o : m.out) {
    size_t k = 0;
    for (int64_t d = 0; d < ndim && k < o.size(); ++d)
      if (!in_list(reduced, d)) o[k++] = in_list(whole, d) ? kNoFactor : factor[d];
  }
  return m;
}

FactorRule reduced_axes_factors(bool contracted) {
  return [contracted](const Avals& in, const Params& p, const Avals& out) -> std::optional<FactorMap> {
    return keep_dims_factors(in, out, {}, p.get<IntList>("axes"), contracted);
  };
}

FactorRule whole_dims_factors(std::string param, bool single) {
  return [param = std::move(param), single](const Avals& in, const Params& p,
                                             const Avals& out) -> std::optional<FactorMap> {
    const IntList whole = single ? IntList{p.get<int64_t>(param)} : p.get<IntList>(param);
    return keep_dims_factors(in, out, whole, {}, false);
  };
}

std::optional<FactorMap> same_size_factors(const Avals& in, const Params&, const Avals& out) {
  FactorMap m = blank_factors(in, out);
  const Shape& o = out[0].shape;
  for (size_t d = 0; d < o.size(); ++d) {
    bool same = true;
    for (const Aval& a : in)
      if (a.shape.size() == o.size()) same &= a.shape[d] == o[d];
    if (!same) continue;
    const int f = m.num_factors++;
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].shape.size() == o.size()) m.in[i][d] = f;
    for (auto& r : m.out)
      if (r.size() == o.size()) r[d] = f;
  }
  return m;
}

std::optional<FactorMap> elementwise_factors(const Avals& in, const Avals& out) {
  if (out.empty()) return std::nullopt;
  const Shape& shape = out[0].shape;
  FactorMap m;
  m.num_factors = static_cast<int>(shape.size());
  std::vector<int> identity(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) identity[d] = static_cast<int>(d);
  for (const Aval& a : in) {
    if (a.ndim() > 0 && a.ndim() != static_cast<int64_t>(shape.size())) return std::nullopt;
    // A size-1 dim the op broadcasts has no factor: XLA sees an explicit broadcast
    // of it just before the op, which replicates that dim.
    std::vector<int> dims = a.ndim() > 0 ? identity : std::vector<int>{};
    for (size_t d = 0; d < dims.size(); ++d)
      if (a.shape[d] != shape[d]) dims[d] = kNoFactor;
    m.in.push_back(std::move(dims));
  }
  for (const Aval& o : out)
    m.out.push_back(o.shape == shape ? identity : std::vector<int>(o.shape.size(), kNoFactor));
  return m;
}

}  // namespace meshsim
