// Bindings of the program transforms: vjp_program, keep_outputs, eval_program, batch_eval,
// partial_eval.
#include "convert.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/transforms/partial_eval.h"
#include "meshsim/transforms/spmd_axes.h"
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

// Python checkpoint policies: `evaluate(policy_name, prim_name, in_avals, params, dot)`;
// `dot` is None unless the primitive declares it is saved as a dot
// (Primitive::saved_as_dot), then whether this application has no batch dims.
PolicyEvaluator python_policies(const py::object& evaluate) {
  if (evaluate.is_none()) return nullptr;
  return [evaluate](const std::string& policy, const Primitive& prim, const Avals& in, const Params& params) {
    py::dict kwargs;
    for (const auto& [k, v] : params.items()) kwargs[py::str(k)] = param_to_py(v);
    const py::object dot = prim.saved_as_dot ? py::object(py::bool_(prim.saved_as_dot(params))) : py::none();
    return evaluate(policy, prim.name, py::cast(in), kwargs, dot).cast<bool>();
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
      "keep_outputs",
      [](const Program& program, const std::vector<bool>& keep) {
        if (keep.size() != program.outvars.size())
          fail<ValueError>("keep_outputs: expected ", program.outvars.size(), " flags, got ", keep.size());
        auto kept = std::make_shared<Program>();
        kept->avals = program.avals;
        kept->constvars = program.constvars;
        kept->consts = program.consts;
        kept->invars = program.invars;
        kept->eqns = program.eqns;
        kept->name = program.name;
        for (size_t i = 0; i < keep.size(); ++i)
          if (keep[i]) kept->outvars.push_back(program.outvars[i]);
        dce(*kept);
        return ProgramPtr(kept);
      },
      py::arg("program"), py::arg("keep"),
      "The program with only the outputs flagged in `keep`, and only the equations they need.");
  m.def(
      "partial_eval",
      [](const Program& program, const std::vector<bool>& known_in, const std::vector<bool>& instantiate) {
        if (known_in.size() != program.invars.size())
          fail<ValueError>("partial_eval: expected ", program.invars.size(), " input flags, got ", known_in.size());
        if (instantiate.size() != program.outvars.size())
          fail<ValueError>("partial_eval: expected ", program.outvars.size(), " output flags, got ",
                           instantiate.size());
        PartialEvalPrograms r = partial_eval(program, known_in, instantiate);
        return py::make_tuple(r.known, r.staged, r.out_known, r.num_residuals);
      },
      py::arg("program"), py::arg("known_in"), py::arg("instantiate"),
      "Splits a program by which inputs are known: (known program: known inputs -> known outputs "
      "+ residuals, staged program: residuals + unknown inputs -> the other outputs, which "
      "outputs are known, the number of residuals).");
  m.def(
      "eval_program",
      [](const Program& program, const py::sequence& args) {
        Values ins;
        for (auto a : args) ins.push_back(to_value(a));
        return to_py(eval_program(program, ins));
      },
      "Applies a program to arrays or tracers, one bind per equation.");
  m.def(
      "batch_eval",
      [](const Program& program, const py::sequence& args, const py::sequence& dims, int64_t size,
         const std::vector<std::string>& spmd_axis_names) {
        SpmdAxisScope spmd(spmd_axis_names);
        Values ins;
        for (auto a : args) ins.push_back(to_value(a));
        BatchDims in_dims;
        for (auto d : dims) in_dims.push_back(d.is_none() ? kNotBatched : d.cast<int64_t>());
        Batched r = batch_eval(program, ins, in_dims, size);
        py::list out_dims;
        for (int64_t d : r.dims) out_dims.append(d == kNotBatched ? py::none() : py::cast(d));
        return py::make_tuple(to_py(r.out), out_dims);
      },
      py::arg("program"), py::arg("args"), py::arg("dims"), py::arg("size"),
      py::arg("spmd_axis_names") = std::vector<std::string>{},
      "Applies a program to a batch of `size` examples: dims[i] is the batch dimension of "
      "args[i] (None: not batched); the batch is split over the mesh axes `spmd_axis_names` "
      "(vmap's spmd_axis_name). Returns the outputs and their batch dimensions.");
  m.def("has_batch_rule", [](const std::string& name) {
    return static_cast<bool>(primitive(name).batch) || primitive(name).elementwise;
  });
  m.def("has_vjp_rule", [](const std::string& name) {
    const Primitive& p = primitive(name);
    return static_cast<bool>(p.vjp) || static_cast<bool>(p.vjp_split);
  });
}

}  // namespace meshsim
