#include "meshsim/ir/unreduced.h"

#include <algorithm>

namespace meshsim {

AxisNames named_axes_param(const Params& params, const std::string& name) {
  if (params.is_none(name)) return {};
  for (const auto& [key, value] : params.items())
    if (key == name) {
      if (const auto* axes = std::get_if<StrList>(&value)) return *axes;
      if (const auto* none = std::get_if<IntList>(&value); none && none->empty()) return {};
      fail<TypeError>("parameter '", name, "' must name mesh axes");
    }
  return {};
}

std::string py_axis_set(const AxisNames& axes) {
  std::string s = "frozenset({";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", '" : "'") + axes[i] + "'";
  return s + "})";
}

namespace {
bool overlaps(const AxisNames& a, const AxisNames& b) {
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}
}  // namespace

AxisNames common_reduced(const Avals& in) {
  AxisNames reduced;
  std::vector<const AxisNames*> distinct;
  for (const Aval& a : in) {
    if (a.reduced.empty()) continue;
    if (std::none_of(distinct.begin(), distinct.end(), [&](const AxisNames* d) { return *d == a.reduced; }))
      distinct.push_back(&a.reduced);
    reduced = a.reduced;
  }
  if (distinct.size() > 1) {
    std::string specs = "{";
    for (size_t i = 0; i < distinct.size(); ++i) specs += (i ? ", " : "") + py_axis_set(*distinct[i]);
    fail<ShardingTypeError>("All inputs should be reduced across the same mesh axes. Got specs: ",
                            specs, "}");
  }
  if (reduced.empty()) return reduced;
  for (const Aval& a : in) {
    AxisNames used = a.vma;
    for (const auto& entry : a.spec) used.insert(used.end(), entry.begin(), entry.end());
    if (overlaps(used, reduced))
      fail<ShardingTypeError>(
          "Inputs cannot be sharded/varying on the same axes that another input is reduced on. "
          "Reshard the input which is reduced to be sharded on the mesh axes it is reduced on via "
          "`jax.sharding.reshard(inp, jax.P(...))`. Got input type: ", a.str_short(),
          " and reduced spec: ", py_axis_set(reduced));
  }
  return reduced;
}

UrAxes default_ur_rule(const std::string& name, const Avals& in) {
  AxisNames reduced = common_reduced(in);
  for (const Aval& a : in)
    if (!a.unreduced.empty())
      fail<NotImplementedError>("unreduced rule for ", name,
                                " is not implemented. Please file an issue at "
                                "https://github.com/jax-ml/jax/issues");
  return {AxisNames{}, reduced};
}

UrRule keep_operand_ur(size_t operand) {
  return [operand](const Avals& in, const Params&) -> UrAxes {
    return {in.at(operand).unreduced, in.at(operand).reduced};
  };
}

UrAxes add_ur_rule(const Avals& in, const Params&) {
  AxisNames reduced = common_reduced(in);
  const AxisNames &x = in.at(0).unreduced, &y = in.at(1).unreduced;
  if (!x.empty() && !y.empty() && x != y)
    fail<ShardingTypeError>("lhs and rhs to `add` must be unreduced along the same mesh axes. Got lhs=",
                            py_axis_set(x), ", rhs=", py_axis_set(y));
  if (x.empty() != y.empty()) {
    const char* lhs = x.empty() ? "rhs" : "lhs";
    const char* rhs = x.empty() ? "lhs" : "rhs";
    fail<ShardingTypeError>(lhs, " is unreduced while ", rhs,
                            " is not. `add` operation does not allow this because there will be "
                            "implicit communication. Please reduce ", lhs, " via `reshard` before "
                            "calling `add`.");
  }
  return {x, reduced};
}

UrAxes mul_ur_rule(const Avals& in, const Params&) {
  const Aval &x = in.at(0), &y = in.at(1);
  if (!x.unreduced.empty() && !y.unreduced.empty())
    fail<ShardingTypeError>("lhs and rhs to `mul` cannot be unreduced since mul is bilinear. Got lhs=",
                            py_axis_set(x.unreduced), ", rhs=", py_axis_set(y.unreduced));
  if (!x.unreduced.empty() && x.unreduced != y.reduced)
    fail<ShardingTypeError>("RHS should be reduced along the same axes LHS is unreduced on. Got lhs=",
                            x.str_short(), " and rhs=", y.str_short());
  if (!y.unreduced.empty() && y.unreduced != x.reduced)
    fail<ShardingTypeError>("LHS should be reduced along the same axes RHS is unreduced on. Got lhs=",
                            x.str_short(), " and rhs=", y.str_short());
  AxisNames unreduced = x.unreduced.empty() ? y.unreduced : x.unreduced;
  // Unreduced times reduced over the same axes: the product is unreduced there.
  if (!unreduced.empty()) return {unreduced, AxisNames{}};
  return {AxisNames{}, common_reduced(in)};
}

}  // namespace meshsim
