// Host callbacks: debug_callback (jax.debug.callback / jax.debug.print: effects, no results)
// and pure_callback (results of the types given). Over global values the function is called
// once with the whole arrays; inside a shard_map body once per device with its blocks, in
// device order, so what it prints comes out as JAX prints it.
#include "meshsim/ir/host_callback.h"

#include <mutex>

#include "meshsim/core/error.h"
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/transforms/batching.h"

namespace meshsim {
namespace {

HostCaller& host_caller() {
  static HostCaller caller;
  return caller;
}

// One call at a time: the function may print, and prints must not interleave.
std::mutex& call_mutex() {
  static std::mutex m;
  return m;
}

Tensors call_host(const Params& params, const Tensors& args, const HostCallSite& site, const Avals& out) {
  if (!host_caller()) fail<std::logic_error>("no host caller is installed");
  std::lock_guard<std::mutex> lock(call_mutex());
  Tensors results = host_caller()(params.get<int64_t>("callback"), args, site, out);
  if (results.size() != out.size())
    fail<ValueError>("the callback returned ", results.size(), " results, expected ", out.size());
  return results;
}

std::vector<Tensors> call_per_device(const MeshContext& ctx, const std::vector<Tensors>& in,
                                     const Params& params, const Avals& out) {
  const Mesh& mesh = ctx.mesh();
  std::vector<Tensors> results(in.size());
  for (size_t pos = 0; pos < in.size(); ++pos)
    results[pos] = call_host(params, in[pos], {mesh.device_ids[pos], mesh.coords(static_cast<int64_t>(pos))}, out);
  return results;
}

Primitive callback_primitive(const std::string& name) {
  Primitive p;
  p.name = name;
  p.operands = at_least(0);  // whatever the host function takes
  p.kernel = [](const Tensors& in, const Params& params, const Avals& out) {
    return call_host(params, in, {}, out);
  };
  // Inside shard_map it runs once over the mesh (each call sees its device);
  // it moves no bytes between devices.
  p.kind = Kind::Collective;
  p.mesh_kernel = call_per_device;
  p.comm = [](const MeshContext&, const std::vector<Tensors>&, const Params&, const Avals&) { return Traffic{}; };
  p.comm_bytes = [](const Avals&, const Avals&, int64_t) { return int64_t{0}; };
  p.comm_steps = [](int64_t) { return int64_t{0}; };
  // Results are not sharded over Explicit axes: the function sees whole arrays.
  p.sharding_rule = [](const Avals&, const Params&, const Avals& out) {
    return std::vector<Spec>(out.size());
  };
  return p;
}

// JAX's batching of pure_callback, by its `vmap_method`: "sequential" (and
// "sequential_unrolled") call the function once per example; the others once
// with each batched operand's batch at dimension 0 and each unbatched one given
// a leading dimension of 1 ("expand_dims"), of the batch's size
// ("broadcast_all") or left as it is ("legacy_vectorized"). The results carry
// the batch at dimension 0.
Batched batch_pure_callback(const BatchArgs& a) {
  const std::string method = a.params.is_none("vmap_method") ? "" : a.params.get<std::string>("vmap_method");
  if (method == "sequential" || method == "sequential_unrolled") return batch_per_example(a);
  if (method != "expand_dims" && method != "broadcast_all" && method != "legacy_vectorized")
    fail<NotImplementedError>("vmap is only supported for the pure_callback primitive when vmap_method is one "
                              "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
                              "'legacy_vectorized'. Got vmap_method=",
                              method.empty() ? "None" : "'" + method + "'", ".");
  Values in;
  for (size_t i = 0; i < a.in.size(); ++i) {
    if (a.dims[i] != kNotBatched || method == "broadcast_all") {
      in.push_back(batch_at(a.in[i], a.dims[i], 0, a.size));
    } else if (method == "expand_dims") {
      in.push_back(batch_at(a.in[i], kNotBatched, 0, 1));
    } else {
      in.push_back(a.in[i]);
    }
  }
  IntLists shapes = a.params.get_or<IntLists>("result_shapes", {});
  for (IntList& s : shapes) s.insert(s.begin(), a.size);
  Params params = a.params;
  params.set("result_shapes", shapes);
  Values out = meshsim::bind(a.prim, in, params);
  return Batched{out, BatchDims(out.size(), 0)};
}

}  // namespace

void set_host_caller(HostCaller caller) { host_caller() = std::move(caller); }

namespace {
HostRules& host_rules() {
  static HostRules rules;
  return rules;
}
}  // namespace

void set_host_rules(HostRules rules) { host_rules() = std::move(rules); }

void register_callback_primitives() {
  Primitive debug = callback_primitive("debug_callback");
  debug.has_effects = true;
  debug.abstract_eval = [](const Avals&, const Params&) { return Avals{}; };
  // A debug callback has no derivative: its operands' cotangents are zero.
  debug.vjp = [](const VjpArgs& a) { return Cotangents(a.in.size()); };
  register_primitive(std::move(debug));

  // pure_callback and io_callback: results of the types given. io_callback has effects, so
  // it is neither differentiated nor (when ordered) batched; unordered, it runs per example.
  auto results_of = [](const Avals&, const Params& params) {
    // A callback of no results has None for both (an empty tuple has no element type).
    const IntLists shapes = params.get_or<IntLists>("result_shapes", {});
    const StrList dtypes = params.get_or<StrList>("result_dtypes", {});
    Avals out;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Aval a;
      a.shape = Shape(shapes[i].begin(), shapes[i].end());
      a.dtype = dtype_from_name(dtypes.at(i));
      out.push_back(a);
    }
    return out;
  };
  Primitive pure = callback_primitive("pure_callback");
  pure.abstract_eval = results_of;
  pure.batch = batch_pure_callback;
  pure.vjp = [](const VjpArgs&) -> Cotangents {
    fail<ValueError>("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use callbacks "
                     "while taking gradients.");
  };
  register_primitive(std::move(pure));

  Primitive io = callback_primitive("io_callback");
  io.has_effects = true;
  io.abstract_eval = results_of;
  io.vjp = [](const VjpArgs&) -> Cotangents { fail<ValueError>("IO callbacks do not support JVP."); };
  io.batch = [](const BatchArgs& a) -> Batched {
    if (a.params.get<bool>("ordered")) fail<ValueError>("Cannot `vmap` ordered IO callback.");
    return batch_per_example(a);
  };
  register_primitive(std::move(io));

  // A collective over a vmapped axis, recorded while the vmapped function is traced on one
  // example. Its operands include the example's index, so it is always batched: batching
  // replaces it with ops along the batch dimension and it never runs itself.
  Primitive named = callback_primitive("host_rule_collective");
  named.kind = Kind::Local;
  named.mesh_kernel = nullptr;
  named.comm = nullptr;
  named.comm_bytes = nullptr;
  named.comm_steps = nullptr;
  named.abstract_eval = results_of;
  named.kernel = [](const Tensors&, const Params&, const Avals&) -> Tensors {
    fail<ValueError>("a collective over a vmapped axis ran outside its vmap");
  };
  named.batch = [](const BatchArgs& a) -> Batched {
    return host_rules().batch(a.params.get<int64_t>("rule"), a.in, a.dims, a.size);
  };
  named.vjp = [](const VjpArgs& a) -> Cotangents {
    return host_rules().vjp(a.params.get<int64_t>("rule"), a.in, a.ct);
  };
  register_primitive(std::move(named));
}

}  // namespace meshsim
