// Sharding primitives over global arrays: the ones that change where a value
// lives rather than what it is.
//
// reshard (and sharding_constraint, its Auto-mesh form): the value laid out
// over `mesh` as `spec`; the type shows the spec's Explicit axes. mesh_cast:
// the same blocks seen through a mesh whose axis types differ (auto_axes /
// explicit_axes): the type keeps only the new mesh's Explicit axes and no
// data moves.
#include "meshsim/ir/printing.h"
#include "meshsim/ir/ops.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/sharded.h"
#include "meshsim/sharding/factors.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/spmd_axes.h"

namespace meshsim {
namespace {

// ('x',) / ('x', 'y'): a tuple of axis names as Python prints it.
std::string names_tuple(const AxisNames& names) {
  Spec one_per_entry;
  for (const auto& n : names) one_per_entry.push_back({n});
  return py_spec_tuple(one_per_entry);
}

// Under vmap the spec gains an entry at the batch dimension: vmap's spmd axes
// for a constraint; for a reshard, the Explicit axes the batch dimension is
// typed over (the vmapped arrays' own). Otherwise the batch stays unsharded.
Batched batch_reshard(const std::string& name, const BatchArgs& a) {
  const int64_t d = a.dims[0];
  const Aval x = aval_of(a.in[0]);
  Spec spec = pad_spec(spec_param(a.params, "spec").value_or(Spec{}), x.ndim() - 1);
  AxisNames batch_axes;
  if (name == "sharding_constraint") {
    batch_axes = spmd_axis_names();
    for (const auto& axis : batch_axes)
      for (const auto& entry : spec)
        if (std::find(entry.begin(), entry.end(), axis) != entry.end())
          fail<ValueError>("vmap spmd_axis_name ", names_tuple(batch_axes),
                           " cannot appear in with_sharding_constraint spec, but got spec ",
                           spec_repr(spec_param(a.params, "spec").value_or(Spec{})));
  } else if (d < static_cast<int64_t>(x.spec.size())) {
    batch_axes = x.spec[d];
  }
  spec.insert(spec.begin() + d, batch_axes);
  Params params = a.params;
  params.set("spec", std::vector<StrList>(spec.begin(), spec.end()));
  return Batched{meshsim::bind(a.prim, a.in, params), {d}};
}

Primitive reshard_primitive(const std::string& name) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.kind = Kind::Global;
  p.layout_only = true;
  p.fixed_result_specs = [](const Params& params) {
    return std::vector<Spec>{spec_param(params, "spec").value_or(Spec{})};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const MeshPtr& mesh = params.get<MeshPtr>("mesh");
    const Spec spec = spec_param(params, "spec").value_or(Spec{});
    const Aval& x = in.at(0);
    check_spec(*mesh, spec, x.ndim());
    Sharding s;
    s.mesh = mesh;
    s.spec = spec;
    s.local_shape(x.shape);  // every sharded dimension divides evenly
    Aval out = x;
    out.mesh = mesh;
    out.spec = explicit_part(spec, *mesh, x.shape.size());
    // The type's pending reductions are the target's (a reshard performs or
    // starts them: runtime/sharded.h).
    out.unreduced = mesh->in_mesh_order(named_axes_param(params, "unreduced"));
    out.reduced = mesh->in_mesh_order(named_axes_param(params, "reduced"));
    for (const auto* axes : {&out.unreduced, &out.reduced})
      for (const auto& a : *axes) mesh->axis_size(a);  // raises for an axis the mesh lacks
    return Avals{out};
  };
  p.array_kernel = [](const std::vector<ArrayPtr>& in, const Params& params, const Avals& out) {
    const Spec spec = spec_param(params, "spec").value_or(Spec{});
    return std::vector<ArrayPtr>{reshard_array(in[0], params.get<MeshPtr>("mesh"), spec, out[0])};
  };
  // The cotangent goes back to the operand's layout, with its pending
  // reductions transposed (JAX's cotangent types: unreduced <-> reduced).
  p.vjp = [name](const VjpArgs& a) {
    const Aval x = aval_of(a.in[0]);
    if (!x.mesh) return Cotangents{*a.ct[0]};
    return Cotangents{ops::bind1(name, {*a.ct[0]}, Params{{"mesh", x.mesh}, {"spec", pad_spec(x.spec, x.shape.size())},
                                                          {"unreduced", StrList(x.reduced)},
                                                          {"reduced", StrList(x.unreduced)}})};
  };
  p.batch = [name](const BatchArgs& a) { return batch_reshard(name, a); };
  return p;
}

Primitive mesh_cast_primitive() {
  Primitive p;
  p.name = "mesh_cast";
  p.operands = exactly(1);
  p.result_is_operand_view = true;
  // Propagation: the result is laid out as the operand (XLA computes the
  // operand as before and reshards it where the types differ).
  p.factors = [](const Avals& in, const Params&, const Avals& out) -> std::optional<FactorMap> {
    return keep_dims_factors(in, out, {}, {}, false);
  };
  p.kind = Kind::Global;
  p.layout_only = true;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const MeshPtr& mesh = params.get<MeshPtr>("mesh");
    Aval out = in.at(0);
    if (out.mesh && !same_devices(*out.mesh, *mesh))
      fail<ValueError>("mesh_cast needs a mesh over the same devices, got ", out.mesh->str(), " and ",
                       mesh->str());
    out.spec = explicit_part(out.spec, *mesh, out.shape.size());
    out.mesh = mesh;
    return Avals{out};
  };
  p.array_kernel = [](const std::vector<ArrayPtr>& in, const Params& params, const Avals& out) {
    const MeshPtr& mesh = params.get<MeshPtr>("mesh");
    const Sharding& s = *in[0]->sharding();
    if (!s.mesh) return std::vector<ArrayPtr>{reshard_array(in[0], mesh, {}, out[0])};
    auto moved = std::make_shared<Sharding>(s);
    moved->mesh = mesh;
    return std::vector<ArrayPtr>{std::make_shared<Array>(out[0], moved, in[0]->shards())};
  };
  p.vjp = [](const VjpArgs& a) {
    const Aval x = aval_of(a.in[0]);
    if (!x.mesh) return Cotangents{*a.ct[0]};
    return Cotangents{ops::bind1("mesh_cast", {*a.ct[0]}, Params{{"mesh", x.mesh}})};
  };
  return p;
}

}  // namespace

void register_sharding_primitives() {
  Primitive reshard = reshard_primitive("reshard");
  reshard.print_rule = [](PrintedEquation& e) { e.params.clear(); };  // JAX's rule: the type shows the sharding
  register_primitive(std::move(reshard));
  Primitive constraint = reshard_primitive("sharding_constraint");
  constraint.result_is_operand_view = true;  // a layout for the partitioner, no copy
  register_primitive(std::move(constraint));
  register_primitive(mesh_cast_primitive());
}

}  // namespace meshsim
