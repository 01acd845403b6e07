#include "meshsim/sharding/rules.h"

#include "meshsim/core/mesh_repr.h"
#include "meshsim/ir/axis_env.h"

#include <algorithm>
#include <set>

namespace meshsim {

// ---- spellings and spec helpers ----------------------------------------------

std::string py_entry(const AxisNames& e) {
  if (e.empty()) return "None";
  if (e.size() == 1) return "'" + e[0] + "'";
  std::string s = "(";
  for (size_t i = 0; i < e.size(); ++i) s += (i ? ", '" : "'") + e[i] + "'";
  return s + ")";
}

std::string py_spec_tuple(const Spec& spec) {
  std::string s = "(";
  for (size_t i = 0; i < spec.size(); ++i) s += (i ? ", " : "") + py_entry(spec[i]);
  return s + (spec.size() == 1 ? ",)" : ")");
}

std::string spec_repr(const Spec& spec) {
  std::string s = "P(";
  for (size_t i = 0; i < spec.size(); ++i) s += (i ? ", " : "") + py_entry(spec[i]);
  return s + (spec.size() == 1 ? ",)" : ")");
}

std::string abstract_mesh_repr(const Mesh& mesh) { return abstract_mesh_str(mesh); }

std::string type_sharding_repr(const Aval& a) {
  if (!a.mesh) return "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=" +
                      spec_repr(pad_spec({}, a.shape.size())) + ")";
  return "NamedSharding(mesh=" + abstract_mesh_repr(*a.mesh) +
         ", spec=" + spec_repr(pad_spec(a.spec, a.shape.size())) + ")";
}

Spec pad_spec(Spec spec, size_t ndim) {
  spec.resize(std::max(ndim, spec.size()));
  return spec;
}

std::optional<Spec> spec_param(const Params& params, const std::string& name) {
  if (params.is_none(name)) return std::nullopt;
  for (const auto& [k, v] : params.items()) {
    if (k != name) continue;
    if (auto* s = std::get_if<std::vector<StrList>>(&v)) return *s;
    if (auto* l = std::get_if<IntList>(&v); l && l->empty()) return Spec{};
    if (auto* l = std::get_if<IntLists>(&v)) return Spec(l->size());
  }
  fail<TypeError>("parameter '", name, "' must be a partition spec");
}

bool is_replicated(const Spec& spec) {
  return std::all_of(spec.begin(), spec.end(), [](const AxisNames& e) { return e.empty(); });
}

bool same_abstract_mesh(const Mesh& a, const Mesh& b) {
  return &a == &b || (a.axis_names == b.axis_names && a.axis_sizes == b.axis_sizes &&
                      a.axis_types == b.axis_types);
}

bool same_devices(const Mesh& a, const Mesh& b) {
  return &a == &b || (a.axis_names == b.axis_names && a.axis_sizes == b.axis_sizes &&
                      a.device_ids == b.device_ids);
}

Spec explicit_part(const Spec& spec, const Mesh& mesh, size_t ndim) {
  Spec out(ndim);
  for (size_t d = 0; d < spec.size() && d < ndim; ++d)
    for (const auto& a : spec[d])
      if (mesh.is_explicit(a)) out[d].push_back(a);
  return out;
}

int64_t entry_size(const Mesh& mesh, const AxisNames& e) {
  int64_t n = 1;
  for (const auto& a : e) n *= mesh.axis_size(a);
  return n;
}

Spec spec_of(const Aval& a) { return pad_spec(a.spec, a.shape.size()); }

std::optional<Spec> out_sharding_param(const Params& p, size_t ndim) {
  if (auto s = spec_param(p, "out_sharding")) return pad_spec(*s, ndim);
  return std::nullopt;
}

std::optional<Spec> cotangent_out_sharding(const Aval& primal) {
  // A primal with pending sums: its cotangent's type is the transpose's (reshard_like).
  if (!primal.mesh || current_axis_env() || !primal.unreduced.empty() || !primal.reduced.empty())
    return std::nullopt;
  const Mesh& mesh = *primal.mesh;
  if (std::none_of(mesh.axis_names.begin(), mesh.axis_names.end(),
                   [&](const std::string& a) { return mesh.is_explicit(a); }))
    return std::nullopt;
  return spec_of(primal);
}

bool in_list(const IntList& l, int64_t d) { return std::find(l.begin(), l.end(), d) != l.end(); }

Spec drop_dims(const Spec& s, const IntList& dims) {
  Spec out;
  for (size_t d = 0; d < s.size(); ++d)
    if (!in_list(dims, static_cast<int64_t>(d))) out.push_back(s[d]);
  return out;
}

// Elementwise on local blocks: every operand laid out as the result (a
// replicated operand is sliced, which moves nothing), but whole along a
// size-1 dim it broadcasts, as the kernel reads it.
LocalPlan elementwise_plan(const Avals& in, const Params& params, const Avals& out) {
  LocalPlan plan;
  for (const Aval& a : in) {
    Spec s = a.ndim() > 0 ? spec_of(out[0]) : Spec{};
    for (size_t d = 0; d < s.size(); ++d)
      if (a.shape[d] != out[0].shape[d]) s[d].clear();
    plan.in_specs.push_back(std::move(s));
  }
  plan.params = params;
  for (const Aval& o : out) plan.out_specs.push_back(spec_of(o));
  return plan;
}

// Operand dimensions that must be whole on each device (gathered if sharded).
std::optional<LocalPlan> gather_dims_plan(const Avals& in, const Params& p, const Avals& out,
                                          const IntList& dims) {
  LocalPlan plan;
  for (const Aval& a : in) {
    Spec s = spec_of(a);
    for (int64_t d : dims)
      if (d < static_cast<int64_t>(s.size())) s[d].clear();
    plan.in_specs.push_back(s);
  }
  plan.params = p;
  for (const Aval& o : out) plan.out_specs.push_back(spec_of(o));
  return plan;
}

// Params naming a result shape get the local block's shape.
PlanRule local_shape_plan(
    const std::string& shape_param) {
  return [shape_param](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    LocalPlan plan = elementwise_plan({}, p, out);
    for (const Aval& a : in) plan.in_specs.push_back(spec_of(a));
    Sharding s;
    s.mesh = out[0].mesh;
    s.spec = spec_of(out[0]);
    plan.params.set(shape_param, IntList(s.local_shape(out[0].shape)));
    return plan;
  };
}

// JAX's _get_sharding_for_varying_out_shape (slicing, padding, dynamic_slice).
std::vector<Spec> varying_shape_rule(const std::string& what, const Aval& x, const Shape& out) {
  const Spec s = spec_of(x);
  for (size_t d = 0; d < s.size(); ++d) {
    if (x.shape[d] == out[d] || s[d].empty()) continue;
    const int64_t n = entry_size(*x.mesh, s[d]);
    if (out[d] % n != 0) {
      std::string shape = "(";
      for (size_t i = 0; i < out.size(); ++i) shape += (i ? ", " : "") + std::to_string(out[i]);
      shape += out.size() == 1 ? ",)" : ")";
      const std::string entry = s[d].size() == 1 ? s[d][0] : py_entry(s[d]);
      fail<ShardingTypeError>(what, " on sharded dims where out dim (", out[d], ") is not divisible "
                              "by mesh axes (", n, ") with spec (", entry, ") is not "
                              "implemented. Got input type=", x.str_short(true),
                              " and output shape=", shape);
    }
  }
  return {s};
}

// A dimension kept whole by an op is local on each device's block.
bool sharded_dims_whole(const Aval& x, const Shape& out) {
  const Spec s = spec_of(x);
  for (size_t d = 0; d < s.size(); ++d)
    if (!s[d].empty() && x.shape[d] != out[d]) return false;
  return true;
}

std::vector<Spec> same_as_operand(const Avals& in, const Params&, const Avals& out) {
  return std::vector<Spec>(out.size(), spec_of(in[0]));
}

std::string sharding_list(const Avals& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + type_sharding_repr(in[i]);
  return s;
}

SpecRule unsharded_dim_rule(
    std::string param, bool sort) {
  return [param, sort](const Avals& in, const Params& p, const Avals& out) {
    const int64_t dim = p.get<int64_t>(param);
    for (const Aval& a : in) {
      if (!a.mesh || dim >= static_cast<int64_t>(spec_of(a).size()) || spec_of(a)[dim].empty()) continue;
      if (sort)
        fail<ShardingTypeError>("Arguments to sort must be unsharded over the sorting dimension. Got "
                                "arg sharding=", type_sharding_repr(a), " and sorting dimension=", dim);
      fail<ShardingTypeError>("Input should be unsharded over the axis being reduced. Got input type=",
                              a.str_short(), " and axis=", dim);
    }
    return std::vector<Spec>(out.size(), spec_of(in[0]));
  };
}

// JAX's str_short(mesh_axis_types=True): float32[8@dp,8]({Explicit: ('dp', 'tp')}).
std::string str_with_axis_types(const Aval& a, const Mesh& mesh) {
  std::vector<std::pair<AxisType, AxisNames>> groups;
  for (size_t i = 0; i < mesh.axis_names.size(); ++i) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == mesh.axis_types[i]; });
    if (it == groups.end()) groups.push_back({mesh.axis_types[i], {mesh.axis_names[i]}});
    else it->second.push_back(mesh.axis_names[i]);
  }
  std::string s = a.str_short() + "({";
  for (size_t i = 0; i < groups.size(); ++i) {
    s += (i ? ", " : "") + std::string(axis_type_name(groups[i].first)) + ": (";
    const AxisNames& n = groups[i].second;
    for (size_t j = 0; j < n.size(); ++j) s += (j ? ", '" : "'") + n[j] + "'";
    s += (n.size() == 1 ? ",)" : ")");
  }
  return s + "})";
}

PlanRule elementwise_like() {
  return [](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    return elementwise_plan(in, p, out);
  };
}

// The operand's own layout, the params unchanged: local when `whole` dims
// (or the checks of the rule) keep every sharded dimension whole. Results of
// the operand's rank keep its layout (not for a transpose).
PlanRule as_is_plan(std::function<bool(const Avals&, const Params&, const Avals&)> local) {
  return [local](const Avals& in, const Params& p, const Avals& out) -> std::optional<LocalPlan> {
    if (local && !local(in, p, out)) return std::nullopt;
    LocalPlan plan;
    for (const Aval& a : in) plan.in_specs.push_back(spec_of(a));
    plan.params = p;
    // A result of the operand's rank is laid out as the operand is (run_local
    // then reshards it to its type, which sharding propagation may choose
    // otherwise, e.g. split along a dim the operation computes whole).
    for (const Aval& o : out)
      plan.out_specs.push_back(!in.empty() && o.ndim() == in[0].ndim() ? plan.in_specs[0] : spec_of(o));
    return plan;
  };
}

namespace {

std::string avals_short(const Avals& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + in[i].str_short(true);
  return s;
}

[[noreturn]] void not_implemented(const std::string& name) {
  fail<ShardingTypeError>("sharding rule for ", name, " is not implemented. Please file an issue at "
                          "https://github.com/jax-ml/jax/issues. You can work around this error by "
                          "dropping that operation into full auto sharding mode via: "
                          "`jax.sharding.auto_axes(fun, out_shardings=...)`");
}

Spec broadcasting_rule(const std::string& name, const Avals& in) {
  std::vector<const Aval*> ranked;
  for (const Aval& a : in)
    if (a.ndim() > 0) ranked.push_back(&a);
  if (ranked.empty()) return {};
  const size_t ndim = ranked[0]->shape.size();
  for (const Aval* a : ranked)
    if (a->shape.size() != ndim) {
      std::string shapes;
      for (size_t i = 0; i < ranked.size(); ++i) shapes += (i ? ", " : "") + shape_str(ranked[i]->shape);
      fail<TypeError>(name, ": arrays must have same number of dimensions, got ", shapes, ".");
    }
  std::vector<Spec> specs;
  for (const Aval* a : ranked) specs.push_back(spec_of(*a));
  Spec out(ndim);
  for (size_t d = 0; d < ndim; ++d) {
    const AxisNames& first = specs[0][d];
    bool all_same = true;
    for (const Spec& s : specs) all_same &= s[d] == first;
    if (all_same) {
      out[d] = first;
      continue;
    }
    // None on a size-1 dimension does not take part.
    std::vector<AxisNames> nontrivial;
    for (size_t i = 0; i < ranked.size(); ++i)
      if (!(ranked[i]->shape[d] == 1 && specs[i][d].empty())) nontrivial.push_back(specs[i][d]);
    if (nontrivial.empty()) continue;
    if (std::all_of(nontrivial.begin(), nontrivial.end(),
                    [&](const AxisNames& e) { return e == nontrivial[0]; })) {
      out[d] = nontrivial[0];
      continue;
    }
    for (const Spec& spec : specs) {
      const AxisNames& s = spec[d];
      if (out[d].empty() && !s.empty()) {
        out[d] = s;
      } else if (!out[d].empty() && !s.empty() && out[d] != s) {
        std::string all;
        for (size_t i = 0; i < specs.size(); ++i) all += (i ? ", " : "") + py_spec_tuple(specs[i]);
        fail<ShardingTypeError>(name, " got incompatible shardings for broadcasting: ", all, ".");
      }
    }
  }
  return out;
}

std::vector<Spec> elementwise_rule(const Primitive& prim, const Avals& in, const Avals& out) {
  for (const Aval& a : in)
    if (a.ndim() > 0 && a.ndim() != out[0].ndim()) not_implemented(prim.name);
  for (const Aval& o : out)
    if (o.shape != out[0].shape) not_implemented(prim.name);
  return std::vector<Spec>(out.size(), pad_spec(broadcasting_rule(prim.name, in), out[0].shape.size()));
}

}  // namespace

// ---- applying rules ---------------------------------------------------------------

void apply_sharding_rule(const Primitive& prim, const Avals& in, const Params& params, Avals& out) {
  if (prim.array_kernel) return;
  MeshPtr mesh;
  bool sharded = false, mixed = false;
  for (const Aval& a : in) {
    if (!a.mesh) continue;
    sharded |= !is_replicated(a.spec);
    if (mesh && !same_abstract_mesh(*mesh, *a.mesh)) mixed = true;
    if (!mesh) mesh = a.mesh;
  }
  if (mixed) {
    // As JAX's abstract evaluation: inputs on meshes whose axes are all Auto have no
    // common mesh; any other pair of different meshes is a ValueError, replicated or not.
    auto all_auto = [](const Mesh& m) {
      return std::all_of(m.axis_types.begin(), m.axis_types.end(),
                         [](AxisType t) { return t == AxisType::Auto; });
    };
    for (const Aval& a : in)
      if (a.mesh && !same_abstract_mesh(*mesh, *a.mesh) && !(all_auto(*mesh) && all_auto(*a.mesh)))
        fail<ValueError>("Mesh for all inputs should be equal. Got one mesh: ",
                         abstract_mesh_repr(*mesh), " and another mesh: ",
                         abstract_mesh_repr(*a.mesh));
    mesh = nullptr;
  }
  if (!mesh) {
    for (Aval& o : out) o.mesh = nullptr, o.spec.clear();
    return;
  }
  // Operands replicated (as JAX does under Auto meshes; JAX would also ask an
  // Explicit mesh for a rule here): the result is replicated too.
  if (!sharded && params.is_none("out_sharding")) {
    for (Aval& o : out) o.mesh = mesh, o.spec.assign(o.shape.size(), {});
    return;
  }
  std::vector<Spec> specs;
  if (prim.sharding_rule) specs = prim.sharding_rule(in, params, out);
  else if (prim.elementwise) specs = elementwise_rule(prim, in, out);
  else not_implemented(prim.name);
  for (size_t i = 0; i < out.size(); ++i) {
    Spec s = pad_spec(specs.at(i), out[i].shape.size());
    std::set<std::string> seen;
    for (const auto& e : s)
      for (const auto& a : e)
        if (!seen.insert(a).second) {
          Aval bad = out[i];
          bad.spec = s;
          bad.vma.clear();
          fail<ShardingTypeError>(prim.name, " operation with inputs: ", avals_short(in),
                                  " produces an illegally sharded result: ", bad.str_short(true));
        }
    out[i].mesh = mesh;
    out[i].spec = std::move(s);
  }
}

std::optional<LocalPlan> local_plan_for(const Primitive& prim, const Avals& in, const Params& params,
                                        const Avals& out) {
  if (prim.local_plan) return prim.local_plan(in, params, out);
  if (prim.elementwise && !prim.sharding_rule) {
    for (const Aval& a : in)
      if (a.ndim() > 0 && a.ndim() != out[0].ndim()) return std::nullopt;
    return elementwise_plan(in, params, out);
  }
  return std::nullopt;
}

}  // namespace meshsim
