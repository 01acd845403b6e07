// shard_map: a body program run on every device of a mesh over local blocks.
//
// Params (printed in JAX's order): check_vma, in_specs, jaxpr (the body,
// traced on block types), mesh, newly_manual_axes, out_specs. Operands are
// global arrays; each is laid out as its in_spec says (its blocks are used as
// they are when it already is) and the body's per-device results are
// assembled into arrays sharded as out_specs say.
#include <algorithm>

#include "meshsim/core/mesh_repr.h"
#include "meshsim/ir/printing.h"
#include "meshsim/ir/axis_env.h"
#include "meshsim/ir/ops.h"
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/runtime/sharded.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/transforms/spmd_axes.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {
namespace {

struct ShardMapParams {
  const Program& body;
  const MeshPtr& mesh;
  const SpecList& in_specs;
  const SpecList& out_specs;

  explicit ShardMapParams(const Params& p)
      : body(*p.get<ProgramPtr>("jaxpr")),
        mesh(p.get<MeshPtr>("mesh")),
        in_specs(p.get<SpecList>("in_specs")),
        out_specs(p.get<SpecList>("out_specs")) {}
};

// Output `j`'s pending reductions as its out_spec names them (JAX's P(..., unreduced=,
// reduced=)): `name` is out_unreduced or out_reduced, one axis list per output (absent for
// outputs after the last listed, e.g. a forward shard_map's residuals).
AxisNames out_pending(const Params& params, const char* name, size_t j) {
  if (params.is_none(name)) return {};
  const auto& lists = params.get<std::vector<StrList>>(name);
  return j < lists.size() ? lists[j] : AxisNames{};
}

int64_t axes_size(const Mesh& mesh, const StrList& axes) {
  int64_t n = 1;
  for (const auto& a : axes) n *= mesh.axis_size(a);
  return n;
}

Spec padded(const Spec& spec, size_t ndim) {
  Spec s = spec;
  s.resize(std::max(ndim, s.size()));
  return s;
}

// Whether a result's type shards over an axis its out_spec does not name (a
// still-Explicit axis of a partial-manual shard_map). Auto axes are never in
// types: such a result is laid out as out_specs say and typed unsharded.
bool types_more_axes(const Spec& type, const Spec& out_spec) {
  for (size_t d = 0; d < type.size(); ++d)
    for (const auto& axis : type[d])
      if (d >= out_spec.size() ||
          std::find(out_spec[d].begin(), out_spec[d].end(), axis) == out_spec[d].end())
        return true;
  return false;
}

bool same_mesh(const Mesh& a, const Mesh& b) {
  return a.axis_names == b.axis_names && a.axis_sizes == b.axis_sizes && a.device_ids == b.device_ids;
}

// The operand's blocks as `spec` over `mesh` lays them out: its own when it
// is already laid out so, otherwise a new split of its global value.
const std::vector<Tensor> blocks_for(const ArrayPtr& x, const MeshPtr& mesh, const Spec& spec) {
  const Sharding& s = *x->sharding();
  const size_t ndim = x->aval().shape.size();
  if (s.mesh && same_mesh(*s.mesh, *mesh) && padded(s.spec, ndim) == padded(spec, ndim))
    return x->shards();
  auto target = std::make_shared<Sharding>();
  target->mesh = mesh;
  target->spec = spec;
  return shard_array(x->global(), target, x->aval().weak_type)->shards();
}

// Device position holding the block device `pos` gets under `spec`: devices
// along axes the spec does not mention hold the same block, so all read the
// one computed at coordinate 0 of those axes (stored once).
// Along `own` axes (an unreduced result's: each device holds its own partial sum) every
// device keeps its own block too.
int64_t representative(const Mesh& mesh, int64_t pos, const Spec& spec, const AxisNames& own = {}) {
  std::vector<int64_t> c = mesh.coords(pos);
  int64_t rep = 0;
  for (size_t i = 0; i < mesh.axis_names.size(); ++i) {
    bool mentioned = std::find(own.begin(), own.end(), mesh.axis_names[i]) != own.end();
    for (const auto& entry : spec)
      mentioned |= std::find(entry.begin(), entry.end(), mesh.axis_names[i]) != entry.end();
    rep = rep * mesh.axis_sizes[i] + (mentioned ? c[i] : 0);
  }
  return rep;
}

Avals shard_map_eval(const Avals& in, const Params& params) {
  ShardMapParams p(params);
  if (in.size() != p.body.invars.size() || in.size() != p.in_specs.size())
    fail<TypeError>("shard_map body takes ", p.body.invars.size(), " operands, got ", in.size());
  Avals out;
  const Avals body_out = p.body.out_avals();
  for (size_t j = 0; j < body_out.size(); ++j) {
    const Spec& spec = p.out_specs.at(j);
    Aval a;
    a.dtype = body_out[j].dtype;
    a.weak_type = body_out[j].weak_type;
    a.shape = body_out[j].shape;
    a.mesh = p.mesh;
    a.spec.assign(a.shape.size(), {});
    for (size_t d = 0; d < spec.size() && d < a.shape.size(); ++d) {
      a.shape[d] *= axes_size(*p.mesh, spec[d]);
      for (const auto& axis : spec[d])
        if (p.mesh->is_explicit(axis)) a.spec[d].push_back(axis);
    }
    // Partial-manual: dimensions the body's result shards over still-Explicit
    // axes keep those (after the manual ones), as JAX's result types do.
    const Spec& inner = body_out[j].spec;
    for (size_t d = 0; d < inner.size() && d < a.spec.size(); ++d)
      for (const auto& axis : inner[d])
        if (std::find(a.spec[d].begin(), a.spec[d].end(), axis) == a.spec[d].end())
          a.spec[d].push_back(axis);
    a.unreduced = p.mesh->in_mesh_order(out_pending(params, "out_unreduced", j));
    a.reduced = p.mesh->in_mesh_order(out_pending(params, "out_reduced", j));
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<ArrayPtr> shard_map_run(const std::vector<ArrayPtr>& in, const Params& params,
                                    const Avals& out_avals) {
  ShardMapParams p(params);
  const Mesh& mesh = *p.mesh;
  const int64_t n = mesh.size();
  std::vector<Tensors> args(n);
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<Tensor> blocks = blocks_for(in[i], p.mesh, p.in_specs[i]);
    for (int64_t d = 0; d < n; ++d) args[d].push_back(std::move(blocks[d]));
  }
  std::vector<Tensors> results =
      run_on_mesh(params.get<ProgramPtr>("jaxpr"), mesh, std::move(args), params.get<bool>("check_vma"));

  std::vector<ArrayPtr> out;
  for (size_t j = 0; j < out_avals.size(); ++j) {
    auto sharding = std::make_shared<Sharding>();
    sharding->mesh = p.mesh;
    sharding->spec = p.out_specs[j];
    std::vector<Tensor> shards(n);
    for (int64_t d = 0; d < n; ++d)
      shards[d] = results[representative(mesh, d, p.out_specs[j], out_avals[j].unreduced)][j];
    if (types_more_axes(out_avals[j].spec, p.out_specs[j])) {
      // Partial-manual over Explicit axes: the type also shards over the
      // non-manual axes the body's result is typed over; slice to it.
      Aval as_laid_out = out_avals[j];
      as_laid_out.spec = p.out_specs[j];
      auto laid_out = std::make_shared<Array>(as_laid_out, std::move(sharding), std::move(shards));
      out.push_back(reshard_array(laid_out, p.mesh, out_avals[j].spec, out_avals[j]));
      continue;
    }
    out.push_back(std::make_shared<Array>(out_avals[j], std::move(sharding), std::move(shards)));
  }
  return out;
}


// --- reverse-mode autodiff -----------------------------------------------------
// The body is split by `vjp_program` (inside its axis environment, so the
// collectives' rules see their axes) into a forward body, bound as a
// shard_map returning the outputs plus residuals, and a backward body, bound
// as a second shard_map from the outputs' cotangents and the residuals to the
// inputs' cotangents. A residual leaves the forward shard_map with a leading
// unit dimension split over the axes it varies over, so every device gets its
// own back. With VMA checking the types already hold every needed psum;
// without it, JAX's defensive rule applies: output cotangents are divided by
// the number of devices they were replicated over and input cotangents summed
// over the axes their in_spec does not mention.

struct AxisEnvScope {
  AxisEnvScope(const Params& p) {
    push_axis_env(AxisEnv{p.get<MeshPtr>("mesh"), p.get<StrList>("newly_manual_axes"),
                          p.get<bool>("check_vma")});
  }
  ~AxisEnvScope() { pop_axis_env(); }
};

Aval with_unit_dim(Aval a) {
  a.shape.insert(a.shape.begin(), 1);
  if (!a.spec.empty()) a.spec.insert(a.spec.begin(), AxisNames{});
  return a;
}

// A residual leaves the body split along its first dimension, as JAX's do,
// unless it has none (a scalar) or that dimension is already split over an
// axis the body leaves automatic: then along a new leading dimension of 1.
bool residual_takes_unit_dim(const Aval& a) {
  return a.ndim() == 0 || (!a.spec.empty() && !a.spec[0].empty());
}

AxisNames unmentioned(const AxisNames& manual, const Spec& spec) {
  AxisNames out;
  for (const auto& a : manual) {
    bool found = false;
    for (const auto& entry : spec) found |= std::find(entry.begin(), entry.end(), a) != entry.end();
    if (!found) out.push_back(a);
  }
  return out;
}

AxisNames vma_plus_names(AxisNames vma, const AxisNames& add) {
  for (const auto& n : add)
    if (std::find(vma.begin(), vma.end(), n) == vma.end()) vma.push_back(n);
  return vma;
}

AxisNames spec_axes(const Spec& spec) {
  AxisNames out;
  for (const auto& entry : spec) out.insert(out.end(), entry.begin(), entry.end());
  return out;
}

Params shard_map_params(const Params& base, ProgramPtr body, SpecList in_specs, SpecList out_specs) {
  Params p = base;
  p.set("in_specs", std::move(in_specs));
  p.set("jaxpr", std::move(body));
  p.set("out_specs", std::move(out_specs));
  return p;
}


VjpSplit shard_map_vjp(const Values& in, const std::vector<bool>& active, const Params& params) {
  const ShardMapParams p(params);
  const MeshPtr mesh = p.mesh;
  const AxisNames manual = params.get<StrList>("newly_manual_axes");
  const bool check_vma = params.get<bool>("check_vma");
  const size_t num_out = p.out_specs.size();
  std::shared_ptr<VjpPrograms> split;
  ProgramPtr fwd;
  SpecList residual_specs;
  {
    AxisEnvScope scope(params);
    split = std::make_shared<VjpPrograms>(
        vjp_program(p.body, active, std::vector<bool>(num_out, true)));
    const Avals fwd_out = split->fwd->out_avals();
    // Without VMA types nothing says a residual is the same on every device.
    for (size_t r = num_out; r < fwd_out.size(); ++r)
      residual_specs.push_back({check_vma ? mesh->in_mesh_order(fwd_out[r].vma) : manual});
    fwd = trace_program(split->fwd->in_avals(), [&](const Values& args) {
      Values outs = eval_program(*split->fwd, args);
      for (size_t r = num_out; r < outs.size(); ++r) {
        const Aval a = aval_of(outs[r]);
        if (!residual_takes_unit_dim(a)) continue;
        IntList dims;
        for (int64_t d = 0; d < a.ndim(); ++d) dims.push_back(d + 1);
        outs[r] = ops::broadcast_in_dim(outs[r], with_unit_dim(a).shape, dims);
      }
      // JAX's forward shard_map gives the residuals first.
      std::rotate(outs.begin(), outs.begin() + static_cast<std::ptrdiff_t>(num_out), outs.end());
      return outs;
    });
  }
  SpecList fwd_out_specs = residual_specs;
  fwd_out_specs.insert(fwd_out_specs.end(), p.out_specs.begin(), p.out_specs.end());
  const size_t num_residuals = residual_specs.size();
  Params fwd_params = shard_map_params(params, fwd, p.in_specs, fwd_out_specs);
  for (const char* pending : {"out_unreduced", "out_reduced"}) {  // per output: none for a residual
    if (params.is_none(pending)) continue;
    std::vector<StrList> lists(num_residuals);
    const auto& outs = params.get<std::vector<StrList>>(pending);
    lists.insert(lists.end(), outs.begin(), outs.end());
    fwd_params.set(pending, std::move(lists));
  }
  Values fwd_outs = meshsim::bind(primitive("shard_map"), in, fwd_params);
  Values residuals(fwd_outs.begin(), fwd_outs.begin() + num_residuals);
  Values outs(fwd_outs.begin() + num_residuals, fwd_outs.end());

  auto backward = [=, in_specs = p.in_specs, out_specs = p.out_specs](const Cotangents& ct) {
    // Operands: the cotangents the backward body takes, then the residuals.
    Values operands;
    SpecList specs;
    for (size_t j = 0; j < num_out; ++j) {
      if (!split->ct_in[j]) continue;
      operands.push_back(ct[j] ? *ct[j] : ops::zeros(aval_of(outs[j])));
      specs.push_back(out_specs[j]);
    }
    const size_t num_ct = operands.size();
    operands.insert(operands.end(), residuals.begin(), residuals.end());
    specs.insert(specs.end(), residual_specs.begin(), residual_specs.end());
    SpecList ct_specs;
    std::vector<size_t> ct_inputs;
    for (size_t i = 0; i < in_specs.size(); ++i)
      if (split->ct_out[i]) {
        ct_specs.push_back(in_specs[i]);
        ct_inputs.push_back(i);
      }

    ProgramPtr bwd;
    {
      AxisEnvScope scope(params);
      Avals body_in = split->bwd->in_avals();
      for (size_t r = num_ct; r < body_in.size(); ++r)
        if (residual_takes_unit_dim(body_in[r])) body_in[r] = with_unit_dim(body_in[r]);
      bwd = trace_program(body_in, [&](const Values& args) {
        Values body_args = args;
        for (size_t k = 0, j = 0; j < num_out; ++j) {
          if (!split->ct_in[j]) continue;
          const AxisNames spread = unmentioned(manual, out_specs[j]);
          if (!check_vma && !spread.empty())
            body_args[k] = ops::div(body_args[k],
                                    ops::full_like(body_args[k],
                                                   double(bound_axis_size(spread, "shard_map"))));
          ++k;
        }
        for (size_t r = num_ct; r < body_args.size(); ++r)
          if (residual_takes_unit_dim(split->bwd->avals[split->bwd->invars[r]]))
            body_args[r] = ops::squeeze(body_args[r], {0});
        Values cts = eval_program(*split->bwd, body_args);
        for (size_t k = 0; k < cts.size(); ++k) {
          const Spec& spec = in_specs[ct_inputs[k]];
          if (check_vma) {
            cts[k] = vary_over(cts[k], spec_axes(spec));
          } else if (AxisNames spread = unmentioned(manual, spec); !spread.empty()) {
            cts[k] = ops::bind1("psum", {cts[k]}, {{"axes", spread}});
          }
        }
        return cts;
      });
    }
    // The inputs' cotangents leave with the pending sums their types swap to:
    // an input reduced over an axis gets a cotangent unreduced there.
    Params bwd_params = shard_map_params(params, bwd, specs, ct_specs);
    std::vector<StrList> ct_unreduced, ct_reduced;
    for (size_t i : ct_inputs) {
      ct_unreduced.push_back(aval_of(in[i]).reduced);
      ct_reduced.push_back(aval_of(in[i]).unreduced);
    }
    bwd_params.set("out_unreduced", std::move(ct_unreduced));
    bwd_params.set("out_reduced", std::move(ct_reduced));
    Values results = meshsim::bind(primitive("shard_map"), operands, bwd_params);
    Cotangents out_ct(in.size());
    for (size_t k = 0; k < ct_inputs.size(); ++k) out_ct[ct_inputs[k]] = results[k];
    return out_ct;
  };
  return VjpSplit{outs, backward};
}

// --- batching (vmap of a shard_map) ---------------------------------------------
// A batched operand keeps its batch dimension, and its in_spec gains an entry
// there: vmap's spmd axes (the batch is split over them, so each device's
// block holds size / |spmd axes| examples and varies over those axes), or
// none (every device holds the whole batch). The body is batched over its
// blocks; a result it batches carries the batch where the body leaves it, its
// out_spec entry likewise. JAX's errors when a spec already names an spmd axis.

void check_no_spmd_axis(const AxisNames& spmd, const SpecList& specs, const char* which) {
  for (const Spec& spec : specs)
    for (const auto& axis : spec_axes(spec))
      if (std::find(spmd.begin(), spmd.end(), axis) != spmd.end())
        fail<ValueError>("vmap spmd_axis_name cannot appear in shard_map ", which);
}

Batched shard_map_batch(const BatchArgs& a) {
  const ShardMapParams p(a.params);
  const AxisNames spmd = p.mesh->in_mesh_order(spmd_axis_names());
  check_no_spmd_axis(spmd, p.in_specs, "in_specs");
  // A size the spmd axes do not divide fails at the bind, with shard_map's error.
  const int64_t block = a.size / axes_size(*p.mesh, spmd);

  SpecList in_specs = p.in_specs;
  Avals body_in = p.body.in_avals();
  for (size_t i = 0; i < a.in.size(); ++i) {
    const int64_t d = a.dims[i];
    if (d == kNotBatched) continue;
    in_specs[i] = padded(in_specs[i], d);
    in_specs[i].insert(in_specs[i].begin() + d, spmd);
    Aval& b = body_in[i];
    b.shape.insert(b.shape.begin() + d, block);
    if (!b.spec.empty()) b.spec.insert(b.spec.begin() + d, AxisNames{});
    if (a.params.get<bool>("check_vma")) b.vma = p.mesh->in_mesh_order(vma_plus_names(b.vma, spmd));
  }
  ProgramPtr body;
  BatchDims out_dims;
  {
    AxisEnvScope scope(a.params);
    body = trace_program(body_in, [&](const Values& args) {
      Batched r = batch_eval(p.body, args, a.dims, block);
      out_dims = r.dims;
      for (size_t j = 0; j < r.out.size(); ++j)
        if (r.dims[j] != kNotBatched && !spmd.empty()) r.out[j] = vary_over(r.out[j], spmd);
      return r.out;
    });
  }
  check_no_spmd_axis(spmd, p.out_specs, "out_specs");
  SpecList out_specs = p.out_specs;
  for (size_t j = 0; j < out_specs.size(); ++j) {
    if (out_dims[j] == kNotBatched) continue;
    out_specs[j] = padded(out_specs[j], out_dims[j]);
    out_specs[j].insert(out_specs[j].begin() + out_dims[j], spmd);
  }
  Values outs = meshsim::bind(a.prim, a.in, shard_map_params(a.params, body, in_specs, out_specs));
  return Batched{outs, out_dims};
}
// A shard_map's in_specs or out_specs as JAX prints them: each P(...) also names
// the pending sums (unreduced=, reduced=) of the value it describes.
std::string spec_with_pending(const Spec& spec, const Aval& a) {
  auto quoted = [](const std::string& axis) { return "'" + axis + "'"; };
  auto axes_text = [&](const AxisNames& axes, const char* open, const char* close) {
    std::string t;
    for (const auto& axis : axes) t += (t.empty() ? "" : ", ") + quoted(axis);
    return open + t + close;
  };
  std::vector<std::string> parts;
  for (const AxisNames& entry : spec)
    parts.push_back(entry.empty() ? "None" : entry.size() == 1 ? quoted(entry[0]) : axes_text(entry, "(", ")"));
  const bool one_partition = parts.size() == 1;
  if (!a.unreduced.empty()) parts.push_back(axes_text(a.unreduced, "unreduced={", "}"));
  if (!a.reduced.empty()) parts.push_back(axes_text(a.reduced, "reduced={", "}"));
  std::string s = "P(";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s + (one_partition && parts.size() == 1 ? ",)" : ")");
}

std::string specs_with_pending(const SpecList& specs, const Program& p, const std::vector<int>& vars) {
  std::string s = "(";
  for (size_t i = 0; i < specs.size(); ++i)
    s += (i ? ", " : "") + spec_with_pending(specs[i], i < vars.size() ? p.avals[vars[i]] : Aval{});
  return s + (specs.size() == 1 ? ",)" : ")");
}

// JAX's pp rule: pending sums print inside the specs; a shard_map of the
// context mesh holds that mesh's abstract form.
void print_shard_map(PrintedEquation& e) {
  e.hide("mesh_from_context");
  e.hide("out_unreduced");
  e.hide("out_reduced");
  for (PrintedParam& q : e.params) {
    if (const auto* specs = std::get_if<SpecList>(&q.value); specs && (q.key == "in_specs" || q.key == "out_specs"))
      q.text = specs_with_pending(*specs, e.program, q.key == "in_specs" ? e.eqn.inputs : e.eqn.outputs);
    if (const auto* mesh = std::get_if<MeshPtr>(&q.value); mesh && *mesh && e.eqn.params.has("mesh_from_context"))
      q.text = abstract_mesh_str(**mesh);
  }
}
}  // namespace

void register_shard_map_primitive() {
  Primitive p;
  p.name = "shard_map";
  p.operands = at_least(0);  // as many as its body's inputs (checked with the body)
  p.sub_program_params = {"jaxpr"};
  p.kind = Kind::Global;
  p.abstract_eval = shard_map_eval;
  p.vma_rule = [](const Avals&, const Params&) { return AxisNames{}; };
  p.array_kernel = shard_map_run;
  p.fixed_result_specs = [](const Params& params) {
    const SpecList& out_specs = params.get<SpecList>("out_specs");
    return std::vector<Spec>(out_specs.begin(), out_specs.end());
  };
  p.vjp_split = shard_map_vjp;
  p.batch = shard_map_batch;
  p.print_rule = print_shard_map;
  register_primitive(std::move(p));
}

}  // namespace meshsim
