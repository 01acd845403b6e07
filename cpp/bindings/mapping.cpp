// Bindings of shard_map: the axis environment its body is traced in, and
// binding the shard_map primitive itself.
#include "convert.h"
#include "meshsim/ir/axis_env.h"
#include "meshsim/runtime/dispatch.h"

namespace meshsim {
namespace py = pybind11;
using namespace py_convert;

void init_mapping(py::module_& m) {
  m.def("push_axis_env", [](MeshPtr mesh, AxisNames manual_axes, bool check_vma) {
    push_axis_env(AxisEnv{std::move(mesh), std::move(manual_axes), check_vma});
  });
  m.def("pop_axis_env", &pop_axis_env);
  m.def("vary_over", [](const py::handle& x, const AxisNames& axes) {
    return from_value(vary_over(to_value(x), axes));
  });
  // (mesh, manual axes, check_vma) of the innermost shard_map being traced, or None.
  m.def("current_axis_env", []() -> py::object {
    const AxisEnv* env = current_axis_env();
    if (!env) return py::none();
    return py::make_tuple(env->mesh, env->manual_axes, env->check_vma);
  });
  // The type of a block of `global` under `spec` inside a shard_map body:
  // the local shape (only the manual axes `spec` names shrink it), varying
  // over `vma`. Dimensions the global type shards over Explicit axes that stay
  // non-manual keep their global size and annotation, as in JAX
  // (partial-manual: f32[8@dp,8@tp] under P('dp') with axis_names={'dp'} is
  // f32[2,8@tp]{V:dp}).
  m.def("block_aval", [](const Aval& global, MeshPtr mesh, const Spec& spec, AxisNames vma) {
    Sharding s;
    s.mesh = mesh;
    s.spec = spec;
    Aval block = global;
    block.shape = s.local_shape(global.shape);
    block.vma = std::move(vma);
    const AxisEnv* env = current_axis_env();
    Spec kept(global.shape.size());
    bool any = false;
    if (env && global.mesh)
      for (size_t d = 0; d < global.spec.size() && d < kept.size(); ++d)
        for (const auto& a : global.spec[d])
          if (!env->is_manual(a) && global.mesh->is_explicit(a)) {
            kept[d].push_back(a);
            any = true;
          }
    block.mesh = any ? global.mesh : nullptr;
    block.spec = any ? std::move(kept) : Spec{};
    return block;
  });
  m.def(
      "bind_shard_map",
      [](const py::sequence& args, ProgramPtr body, MeshPtr mesh, const SpecList& in_specs,
         const SpecList& out_specs, const AxisNames& manual_axes, bool check_vma,
         bool mesh_from_context, const std::vector<StrList>& out_unreduced,
         const std::vector<StrList>& out_reduced) {
        std::vector<Value> ins;
        for (auto a : args) ins.push_back(to_value(a));
        // JAX's parameter order, so the equation prints as JAX prints it.
        Params params{{"check_vma", check_vma},        {"in_specs", in_specs},
                      {"jaxpr", std::move(body)},       {"mesh", std::move(mesh)},
                      {"newly_manual_axes", manual_axes}, {"out_specs", out_specs}};
        if (mesh_from_context) params.set("mesh_from_context", true);
        auto any_axes = [](const std::vector<StrList>& l) {
          return std::any_of(l.begin(), l.end(), [](const StrList& a) { return !a.empty(); });
        };
        if (any_axes(out_unreduced)) params.set("out_unreduced", out_unreduced);
        if (any_axes(out_reduced)) params.set("out_reduced", out_reduced);
        const Primitive& prim = primitive("shard_map");
        std::vector<Value> outs;
        Avals in;
        std::vector<ArrayPtr> arrays;
        for (const Value& v : ins)
          if (auto* a = std::get_if<ArrayPtr>(&v)) {
            arrays.push_back(*a);
            in.push_back((*a)->aval());
          }
        if (!current_trace() && arrays.size() == ins.size()) {
          // Eager: dispatched like a jitted call, then awaited with the GIL
          // held, so Ctrl-C reaches it and its errors raise here, as JAX's do.
          ProgramPtr program = single_equation_program(prim, in, params, infer_avals(prim, in, params));
          std::vector<ArrayPtr> results;
          {
            py::gil_scoped_release nogil;
            results = dispatch_program(program, std::move(arrays));
          }
          for (ArrayPtr& r : results) {
            r->shards();  // waits (polling for Ctrl-C); raises what the devices raised
            outs.push_back(std::move(r));
          }
        } else {
          py::gil_scoped_release nogil;
          outs = meshsim::bind(prim, ins, params);
        }
        py::tuple res(outs.size());
        for (size_t i = 0; i < outs.size(); ++i) res[i] = from_value(outs[i]);
        return res;
      },
      py::arg("args"), py::arg("body"), py::arg("mesh"), py::arg("in_specs"), py::arg("out_specs"),
      py::arg("manual_axes"), py::arg("check_vma"), py::arg("mesh_from_context") = false,
      py::arg("out_unreduced") = std::vector<StrList>{}, py::arg("out_reduced") = std::vector<StrList>{});
}

}  // namespace meshsim
