// Factor maps (ir/primitive.h `FactorMap`) of the primitives that sharding
// propagation over Auto axes flows through, as Shardy's operation sharding
// rules relate their dimensions. The elementwise family needs none (its map
// is the identity, built by propagation itself).
#include <algorithm>
#include <map>

#include "meshsim/sharding/propagation.h"

namespace meshsim {
namespace {

using Factors = std::optional<FactorMap>;

// A map with every dimension unrelated (kNoFactor), to be filled in.
FactorMap blank(const Avals& in, const Avals& out) {
  FactorMap m;
  for (const Aval& a : in) m.in.emplace_back(a.shape.size(), kNoFactor);
  for (const Aval& a : out) m.out.emplace_back(a.shape.size(), kNoFactor);
  return m;
}

bool listed(const IntList& l, int64_t d) { return std::find(l.begin(), l.end(), d) != l.end(); }

// Operand 0's dimensions keep their factor in every result, except `whole`
// dims (computed whole) and `reduced` dims (absent from the results,
// contracted when `contracted`, otherwise computed whole). Further operands
// of the operand's shape (sort's) share the map.
Factors keep_dims(const Avals& in, const Avals& out, const IntList& whole, const IntList& reduced,
                  bool contracted) {
  FactorMap m = blank(in, out);
  const int64_t ndim = in[0].ndim();
  std::vector<int> factor(ndim, kNoFactor);
  for (int64_t d = 0; d < ndim; ++d)
    if (!listed(whole, d) && (contracted || !listed(reduced, d))) factor[d] = m.num_factors++;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].shape == in[0].shape) m.in[i] = factor;
  for (auto& o : m.out) {
    size_t k = 0;
    for (int64_t d = 0; d < ndim && k < o.size(); ++d)
      if (!listed(reduced, d)) o[k++] = listed(whole, d) ? kNoFactor : factor[d];
  }
  return m;
}

Factors dot_general_factors(const Avals& in, const Params& p, const Avals& out) {
  const IntLists& dn = p.get<IntLists>("dimension_numbers");
  const IntList &lc = dn[0], &rc = dn[1], &lb = dn[2], &rb = dn[3];
  FactorMap m = blank(in, out);
  size_t o = 0;
  for (size_t i = 0; i < lb.size(); ++i, ++o) {
    m.in[0][lb[i]] = m.in[1][rb[i]] = m.out[0][o] = m.num_factors++;
  }
  for (int64_t d = 0; d < in[0].ndim(); ++d)
    if (!listed(lc, d) && !listed(lb, d)) m.in[0][d] = m.out[0][o++] = m.num_factors++;
  for (int64_t d = 0; d < in[1].ndim(); ++d)
    if (!listed(rc, d) && !listed(rb, d)) m.in[1][d] = m.out[0][o++] = m.num_factors++;
  for (size_t i = 0; i < lc.size(); ++i) m.in[0][lc[i]] = m.in[1][rc[i]] = m.num_factors++;
  return m;
}

Factors transpose_factors(const Avals& in, const Params& p, const Avals& out) {
  FactorMap m = blank(in, out);
  const IntList& perm = p.get<IntList>("permutation");
  for (size_t d = 0; d < perm.size(); ++d) m.in[0][perm[d]] = m.out[0][d] = m.num_factors++;
  return m;
}

Factors broadcast_in_dim_factors(const Avals& in, const Params& p, const Avals& out) {
  FactorMap m = blank(in, out);
  const IntList& dims = p.get<IntList>("broadcast_dimensions");
  std::vector<bool> from_operand(out[0].shape.size(), false);
  for (size_t d = 0; d < dims.size(); ++d)
    if (in[0].shape[d] == out[0].shape[dims[d]]) {
      m.in[0][d] = m.out[0][dims[d]] = m.num_factors++;
      from_operand[dims[d]] = true;
    }
  for (size_t d = 0; d < from_operand.size(); ++d)
    if (!from_operand[d] && out[0].shape[d] > 1) m.out[0][d] = m.num_factors++;
  return m;
}

// Dimensions are grouped where their products agree; a dimension that is a
// whole group on one side shares its factor with the group's first non-unit
// dimension on the other (its blocks stay contiguous); the rest are whole.
Factors reshape_factors(const Avals& in, const Params&, const Avals& out) {
  FactorMap m = blank(in, out);
  const Shape &a = in[0].shape, &b = out[0].shape;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == 1) { ++i; continue; }
    if (b[j] == 1) { ++j; continue; }
    size_t i_end = i + 1, j_end = j + 1;
    int64_t pa = a[i], pb = b[j];
    while (pa != pb) {
      if (pa < pb) {
        if (i_end == a.size()) return m;
        pa *= a[i_end++];
      } else {
        if (j_end == b.size()) return m;
        pb *= b[j_end++];
      }
    }
    if (i_end == i + 1 || j_end == j + 1) m.in[0][i] = m.out[0][j] = m.num_factors++;
    i = i_end;
    j = j_end;
  }
  return m;
}

Factors squeeze_factors(const Avals& in, const Params& p, const Avals& out) {
  FactorMap m = blank(in, out);
  const IntList& dims = p.get<IntList>("dimensions");
  size_t k = 0;
  for (int64_t d = 0; d < in[0].ndim(); ++d)
    if (!listed(dims, d)) m.in[0][d] = m.out[0][k++] = m.num_factors++;
  return m;
}

// Dimensions whose size the operation keeps pass through; the others
// (sliced, padded, concatenated) are computed whole. Operands of the
// result's rank share the map (concatenate's).
Factors same_size_dims(const Avals& in, const Params&, const Avals& out) {
  FactorMap m = blank(in, out);
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

}  // namespace

void install_factor_rules(std::map<std::string, Primitive>& table) {
  auto set = [&](const std::string& name, decltype(Primitive::factors) rule) {
    auto it = table.find(name);
    if (it != table.end()) it->second.factors = std::move(rule);
  };
  set("dot_general", dot_general_factors);
  set("transpose", transpose_factors);
  set("broadcast_in_dim", broadcast_in_dim_factors);
  set("reshape", [](const Avals& in, const Params& p, const Avals& out) -> Factors {
    if (!p.is_none("out_sharding")) return std::nullopt;
    return reshape_factors(in, p, out);
  });
  set("squeeze", squeeze_factors);
  for (const char* name : {"reduce_sum", "reduce_max", "reduce_min", "reduce_or", "reduce_and"})
    set(name, [](const Avals& in, const Params& p, const Avals& out) {
      return keep_dims(in, out, {}, p.get<IntList>("axes"), true);
    });
  for (const char* name : {"reduce_prod", "reduce_xor", "argmax", "argmin"})
    set(name, [](const Avals& in, const Params& p, const Avals& out) {
      return keep_dims(in, out, {}, p.get<IntList>("axes"), false);
    });
  for (const char* name : {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "top_k"})
    set(name, [](const Avals& in, const Params& p, const Avals& out) {
      return keep_dims(in, out, {p.get<int64_t>("axis")}, {}, false);
    });
  set("sort", [](const Avals& in, const Params& p, const Avals& out) {
    return keep_dims(in, out, {p.get<int64_t>("dimension")}, {}, false);
  });
  set("rev", [](const Avals& in, const Params& p, const Avals& out) {
    return keep_dims(in, out, p.get<IntList>("dimensions"), {}, false);
  });
  for (const char* name : {"slice", "pad", "concatenate", "dynamic_slice", "dynamic_update_slice"})
    set(name, same_size_dims);
  // A sharding constraint's result is fixed and its operand keeps the layout
  // it has (XLA computes the operand as before and reshards it).
  set("mesh_cast", [](const Avals& in, const Params&, const Avals& out) {
    return keep_dims(in, out, {}, {}, false);
  });
}

}  // namespace meshsim
