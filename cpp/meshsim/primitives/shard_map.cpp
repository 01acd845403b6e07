// shard_map: a body program run on every device of a mesh over local blocks.
//
// Params (printed in JAX's order): check_vma, in_specs, jaxpr (the body,
// traced on block types), mesh, newly_manual_axes, out_specs. Operands are
// global arrays; each is laid out as its in_spec says (its blocks are used as
// they are when it already is) and the body's per-device results are
// assembled into arrays sharded as out_specs say.
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/mesh_executor.h"

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
int64_t representative(const Mesh& mesh, int64_t pos, const Spec& spec) {
  std::vector<int64_t> c = mesh.coords(pos);
  int64_t rep = 0;
  for (size_t i = 0; i < mesh.axis_names.size(); ++i) {
    bool mentioned = false;
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
  std::vector<Tensors> results = run_on_mesh(p.body, mesh, std::move(args));

  std::vector<ArrayPtr> out;
  for (size_t j = 0; j < out_avals.size(); ++j) {
    auto sharding = std::make_shared<Sharding>();
    sharding->mesh = p.mesh;
    sharding->spec = p.out_specs[j];
    std::vector<Tensor> shards(n);
    for (int64_t d = 0; d < n; ++d)
      shards[d] = results[representative(mesh, d, p.out_specs[j])][j];
    out.push_back(std::make_shared<Array>(out_avals[j], std::move(sharding), std::move(shards)));
  }
  return out;
}

}  // namespace

void register_shard_map_primitive() {
  Primitive p;
  p.name = "shard_map";
  p.abstract_eval = shard_map_eval;
  p.vma_rule = [](const Avals&, const Params&) { return AxisNames{}; };
  p.array_kernel = shard_map_run;
  register_primitive(std::move(p));
}

}  // namespace meshsim
