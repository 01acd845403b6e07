// Bindings of the autodiff transform: vjp_program, eval_program.
#include "convert.h"
#include "meshsim/transforms/vjp.h"

namespace meshsim {
namespace py = pybind11;
using namespace py_convert;

namespace {

py::tuple to_py(const Values& vals) {
  py::tuple res(vals.size());
  for (size_t i = 0; i < vals.size(); ++i) res[i] = from_value(vals[i]);
  return res;
}

// Python checkpoint policies: `evaluate(policy_name, prim_name, in_avals, params)`.
PolicyEvaluator python_policies(const py::object& evaluate) {
  if (evaluate.is_none()) return nullptr;
  return [evaluate](const std::string& policy, const Primitive& prim, const Avals& in, const Params& params) {
    py::dict kwargs;
    for (const auto& [k, v] : params.items()) kwargs[py::str(k)] = param_to_py(v);
    return evaluate(policy, prim.name, py::cast(in), kwargs).cast<bool>();
  };
}

}  // namespace

void init_autodiff(py::module_& m) {
  m.def(
      "vjp_program",
      [](const Program& program, const std::vector<bool>& wrt, const std::vector<bool>& out_mask,
         const py::object& policies) {
        ScopedPolicyEvaluator scope(python_policies(policies));
        VjpPrograms r = vjp_program(program, wrt, out_mask);
        return py::make_tuple(r.fwd, r.bwd, r.num_residuals, r.ct_in, r.ct_out);
      },
      py::arg("program"), py::arg("wrt"), py::arg("out_mask"), py::arg("policies") = py::none(),
      "Splits a program into forward (inputs -> outputs + residuals) and backward (output "
      "cotangents + residuals -> input cotangents) programs.");
  m.def(
      "eval_program",
      [](const Program& program, const py::sequence& args) {
        Values ins;
        for (auto a : args) ins.push_back(to_value(a));
        return to_py(eval_program(program, ins));
      },
      "Applies a program to arrays or tracers, one bind per equation.");
  m.def("has_vjp_rule", [](const std::string& name) {
    const Primitive& p = primitive(name);
    return static_cast<bool>(p.vjp) || static_cast<bool>(p.vjp_split);
  });
}

}  // namespace meshsim
