// Bindings of tracing and programs: bind, trace frames, Tracer, Program.
#include <map>
#include <unordered_map>

#include "convert.h"
#include "meshsim/ir/program_consts.h"
#include "meshsim/ir/xla_instruction.h"
#include "meshsim/runtime/dispatch.h"
#include "meshsim/runtime/inlined_calls.h"
#include "meshsim/runtime/interpreter.h"
#include "meshsim/runtime/sharded.h"
#include "meshsim/sharding/propagation.h"

namespace meshsim {
namespace py = pybind11;
using namespace py_convert;

namespace {

// The program to dispatch for an eager bind of concrete arrays (see
// eager_program), or null to apply the primitive on the calling thread.
ProgramPtr eager_program_for(const Primitive& prim, const std::vector<Value>& ins, const Params& params) {
  if (prim.kind != Kind::Local || !async_dispatch_enabled()) return nullptr;  // before typing it
  Avals in;
  for (const Value& v : ins) {
    if (!std::holds_alternative<ArrayPtr>(v)) return nullptr;
    in.push_back(aval_of(v));
  }
  return eager_program(prim, in, params, infer_avals(prim, in, params));
}

// The user's frame of the Python stack, summarized as JAX's source_info_util
// does: the innermost frame whose file is outside the excluded directories
// (meshsim's own package and the standard library), as
// "file:line:column (function)". Runs with the GIL held, which guards the
// caches; each cached code object is kept alive so its address is not reused.
class UserFrames {
 public:
  explicit UserFrames(std::vector<std::string> excluded) : excluded_(std::move(excluded)) {}

  SourceInfo operator()() {
    if (!Py_IsInitialized() || !PyGILState_Check()) return nullptr;
    PyFrameObject* frame = PyEval_GetFrame();  // borrowed
    Py_XINCREF(frame);
    SourceInfo found;
    while (frame && !found) {
      PyCodeObject* code = PyFrame_GetCode(frame);
      if (is_user_code(code)) found = summary(code, PyFrame_GetLasti(frame));
      Py_DECREF(code);
      PyFrameObject* back = PyFrame_GetBack(frame);
      Py_DECREF(frame);
      frame = back;
    }
    Py_XDECREF(frame);
    return found;
  }

 private:
  bool is_user_code(PyCodeObject* code) {
    auto it = user_code_.find(code);
    if (it != user_code_.end()) return it->second;
    Py_INCREF(code);
    const std::string file = py::str(py::handle(reinterpret_cast<PyObject*>(code)).attr("co_filename"));
    bool user = true;
    for (const std::string& prefix : excluded_) user = user && file.compare(0, prefix.size(), prefix) != 0;
    return user_code_[code] = user;
  }

  SourceInfo summary(PyCodeObject* code, int lasti) {
    auto& cached = summaries_[{code, lasti}];
    if (cached) return cached;
    int line = 0, column = 0, end_line = 0, end_column = 0;
    if (!PyCode_Addr2Location(code, lasti, &line, &column, &end_line, &end_column)) line = column = 0;
    const py::handle c(reinterpret_cast<PyObject*>(code));
    std::string text = py::str(c.attr("co_filename")).cast<std::string>() + ":" + std::to_string(line);
    if (column != 0) text += ":" + std::to_string(column);
    text += " (" + py::str(c.attr("co_qualname")).cast<std::string>() + ")";
    cached = std::make_shared<const std::string>(std::move(text));
    return cached;
  }

  std::vector<std::string> excluded_;
  std::unordered_map<PyCodeObject*, bool> user_code_;
  std::map<std::pair<PyCodeObject*, int>, SourceInfo> summaries_;
};

}  // namespace

void init_tracing(py::module_& m) {
  // Equations record the user's line from now on; `excluded` are directory prefixes.
  m.def("capture_sources_outside", [](std::vector<std::string> excluded) {
    set_source_capture([frames = std::make_shared<UserFrames>(std::move(excluded))] { return (*frames)(); });
  });
  py::class_<Tracer, TracerPtr>(m, "Tracer", py::dynamic_attr())
      .def_property_readonly("aval", &Tracer::aval, py::return_value_policy::copy)
      .def_property_readonly("shape", [](const Tracer& t) { return py::tuple(py::cast(t.aval().shape)); })
      .def_property_readonly("dtype", [](const Tracer& t) { return to_numpy_dtype(t.aval().dtype); })
      .def_property_readonly("ndim", [](const Tracer& t) { return t.aval().ndim(); })
      .def_property_readonly("size", [](const Tracer& t) { return num_elements(t.aval().shape); })
      .def_property_readonly("weak_type", [](const Tracer& t) { return t.aval().weak_type; })
      .def_property_readonly("trace", [](const Tracer& t) { return t.trace; })
      // Its variable in `trace`'s program; -1 when it belongs to another trace.
      .def("var_in", [](const Tracer& t, const TracePtr& trace) { return t.trace == trace ? t.var : -1; });

  py::class_<Program, ProgramPtr>(m, "Program")
      .def_property_readonly("in_avals", &Program::in_avals)
      .def_property_readonly("out_avals", &Program::out_avals)
      .def_property_readonly("num_eqns", [](const Program& p) { return p.eqns.size(); })
      .def("primitive_names", [](const Program& p) {
        std::vector<std::string> names;
        for (const auto& e : p.eqns) names.push_back(e.prim->name);
        return names;
      })
      // A copy taking `avals` as inputs: input i of the original is input
      // `where[i]`; the others are unused (how control flow puts the values
      // several sub-programs close over in front of each one's operands).
      .def("with_inputs", [](const Program& p, const Avals& avals, const std::vector<int>& where) {
        auto q = std::make_shared<Program>(p);
        q->invars.assign(avals.size(), -1);
        for (size_t i = 0; i < where.size(); ++i) q->invars.at(where[i]) = p.invars[i];
        for (size_t k = 0; k < avals.size(); ++k)
          if (q->invars[k] < 0) q->invars[k] = q->new_var(avals[k]);
        return q;
      })
      // A copy whose constants of one or more dims are trailing inputs, and
      // those arrays: how JAX passes the arrays a control-flow body closes
      // over, as operands, so that XLA compiling an eager loop or branch sees
      // parameters where a jitted one sees constants (0-d ones stay literals).
      .def("with_array_consts_as_inputs", [](const Program& p) {
        auto q = std::make_shared<Program>(p);
        q->constvars.clear();
        q->consts.clear();
        std::vector<ArrayPtr> hoisted;
        for (size_t i = 0; i < p.consts.size(); ++i) {
          if (p.consts[i].ndim() == 0) {
            q->constvars.push_back(p.constvars[i]);
            q->consts.push_back(p.consts[i]);
          } else {
            q->invars.push_back(p.constvars[i]);
            hoisted.push_back(const_array(p, i));
          }
        }
        return py::make_tuple(q, hoisted);
      })
      .def("__str__", &Program::str)
      .def_readwrite("name", &Program::name)
      // The program's structure, for abstract compilation (meshsim._src.planning):
      // every variable's type, the program's variables and, per equation, its
      // primitive, variables, params and the primitive's own cost on those types.
      .def_property_readonly("avals", [](const Program& p) { return p.avals; })
      .def_property_readonly("invars", [](const Program& p) { return p.invars; })
      .def_property_readonly("outvars", [](const Program& p) { return p.outvars; })
      .def_property_readonly("constvars", [](const Program& p) { return p.constvars; })
      // The arrays the constvars stand for, in their order (a scalar one prints as a literal).
      .def_property_readonly("consts", [](const Program& p) {
        std::vector<ArrayPtr> arrays;
        for (size_t i = 0; i < p.consts.size(); ++i) arrays.push_back(const_array(p, i));
        return arrays;
      })
      // Per equation: where the user's code traced it ("file:line:column (function)"), or None.
      .def("source_infos", [](const Program& p) {
        py::list out;
        for (const Equation& e : p.eqns) out.append(e.source_info ? py::cast(*e.source_info) : py::none());
        return out;
      })
      .def("equations", [](const Program& p) {
        py::list out;
        for (const Equation& e : p.eqns) {
          Avals in, res;
          for (int v : e.inputs) in.push_back(p.avals[v]);
          for (int v : e.outputs) res.push_back(p.avals[v]);
          py::dict params;
          for (const auto& [k, v] : e.params.items()) params[py::str(k)] = param_to_py(v);
          const Cost c = cost_of(*e.prim, in, e.params, res);
          out.append(py::make_tuple(e.prim->name, e.inputs, e.outputs, params, c.flops,
                                    c.bytes_accessed, e.prim->is_collective(), e.prim->elementwise));
        }
        return out;
      })
      // The program as XLA schedules it, its nested calls inlined
      // (runtime/inlined_calls.h); the program itself when it holds none.
      .def("with_calls_inlined", [](const ProgramPtr& p) -> ProgramPtr {
        std::optional<Program> inlined = with_calls_inlined(*p);
        return inlined ? std::make_shared<Program>(std::move(*inlined)) : p;
      })
      // Per input: whether an equation reads it or it is a result.
      .def("used_inputs", [](const Program& p) {
        std::vector<int> last = last_uses(p);
        std::vector<bool> used;
        for (int v : p.invars) used.push_back(last[v] >= 0);
        return used;
      })
      // A call: returns the results, futures while the program runs.
      .def("run", [](const ProgramPtr& p, std::vector<ArrayPtr> args) {
        py::gil_scoped_release nogil;
        return dispatch_program(p, std::move(args));
      })
      .def("run", [](const ProgramPtr& p, std::vector<ArrayPtr> args, const std::vector<bool>& donated) {
        py::gil_scoped_release nogil;
        return dispatch_program(p, std::move(args), donated);
      })
      // (mesh, spec of every variable) as propagation lays them out over the
      // program's mesh with Auto axes for `args`; None without such a mesh.
      .def("auto_layouts", [](const ProgramPtr& p, const std::vector<ArrayPtr>& args) -> py::object {
        auto layouts = auto_layouts(*p, args);
        if (!layouts) return py::none();
        return py::make_tuple(layouts->first, layouts->second);
      });

  py::class_<Trace, TracePtr>(m, "Trace")
      .def("new_input", &Trace::new_input)
      .def("finish", [](Trace& t, const py::sequence& outputs) {
        std::vector<Value> outs;
        for (auto o : outputs) outs.push_back(to_value(o));
        return t.finish(outs);
      })
      // Finishes a trace that may close over tracers of enclosing traces:
      // returns the program and those tracers (its trailing inputs).
      .def("finish_capturing", [](Trace& t, const py::sequence& outputs) {
        std::vector<Value> outs;
        for (auto o : outputs) outs.push_back(to_value(o));
        std::vector<TracerPtr> captures;
        ProgramPtr program = t.finish(outs, &captures);
        return py::make_tuple(program, captures);
      })
      // The program recorded so far with `outputs` as its results, leaving the
      // trace open (how an eager shard_map body computes a value it prints).
      .def("snapshot", [](Trace& t, const py::sequence& outputs) {
        std::vector<int> outvars;
        for (auto o : outputs) outvars.push_back(t.var_for(to_value(o)));
        auto program = std::make_shared<Program>(t.program());
        program->outvars = std::move(outvars);
        return program;
      });
  // Bytes each device sends in one collective over groups of n devices, from
  // the types: the collective's communication model (Primitive::comm_bytes).
  m.def("collective_bytes", [](const std::string& name, const Aval& in, const Aval& out, int64_t n) {
    return primitive(name).comm_bytes({in}, {out}, n);
  });
  // The sequential steps (link latencies) of one collective over a group of
  // n devices: its communication model's algorithm (Primitive::comm_steps).
  m.def("collective_steps", [](const std::string& name, int64_t n) {
    const Primitive& p = primitive(name);
    if (!p.comm_steps) fail<ValueError>("'", name, "' is not a collective");
    return n > 1 ? p.comm_steps(n) : int64_t{0};
  });
  // The XLA instruction a collective lowers to ("all-reduce", ...), or None
  // (ir/xla_instruction.h): how compiled text and the step-time model tell
  // collectives apart without lists of names.
  m.def("collective_instruction", [](const std::string& name) {
    if (!primitive(name).is_collective()) fail<ValueError>("'", name, "' is not a collective");
    return xla_instruction(name);
  });
  // The collective that combines a local plan's partial results by `reduction`
  // ("sum", "max", "min"), as its registration declares (Primitive::partials_reduction).
  m.def("partials_all_reduce", [](const std::string& reduction) {
    if (reduction != "sum" && reduction != "max" && reduction != "min")
      fail<ValueError>("unknown reduction '", reduction, "': expected 'sum', 'max' or 'min'");
    return partials_all_reduce(reduction).name;
  });
  m.def("push_trace", &push_trace);
  m.def("pop_trace", &pop_trace);
  m.def("current_trace", &current_trace);

  m.def("bind", [](const std::string& name, const py::sequence& args, const py::dict& params) {
    const Primitive& prim = primitive(name);
    std::vector<Value> ins;
    ins.reserve(args.size());
    for (auto a : args) ins.push_back(to_value(a));
    Params ps = to_params(params);
    if (ProgramPtr eager = current_trace() ? nullptr : eager_program_for(prim, ins, ps)) {
      std::vector<ArrayPtr> arrays;
      for (const Value& v : ins) arrays.push_back(std::get<ArrayPtr>(v));
      std::vector<ArrayPtr> outs;
      {
        py::gil_scoped_release nogil;
        outs = dispatch_program(eager, std::move(arrays));
      }
      py::tuple res(outs.size());
      for (size_t i = 0; i < outs.size(); ++i) res[i] = py::cast(outs[i]);
      return res;
    }
    std::vector<Value> outs = meshsim::bind(prim, ins, ps);
    py::tuple res(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) res[i] = from_value(outs[i]);
    return res;
  });
  m.def("abstract_eval", [](const std::string& name, const Avals& in, const py::dict& params) {
    return infer_avals(primitive(name), in, to_params(params));
  });
  m.def("primitive_names", &primitive_names);
  // What a primitive declares (its kind, traits and which rules it has), for
  // the registry test: {"kind": ..., "elementwise": bool, "sharding_rule": bool, ...}.
  m.def("primitive_info", [](const std::string& name) {
    const Primitive& p = primitive(name);
    py::dict d;
    d["kind"] = kind_name(p.kind);
    // (min, max) operands, max None for any number; None when undeclared.
    const OperandCount& n = p.operands;
    auto bound = [](int v) { return v == OperandCount::kAnyNumber ? py::object(py::none()) : py::object(py::int_(v)); };
    d["operands"] = n.declared() ? py::object(py::make_tuple(n.min, bound(n.max))) : py::object(py::none());
    d["elementwise"] = p.elementwise;
    d["uses_blas"] = p.uses_blas;
    d["passes_through"] = p.passes_through;
    d["kernel"] = bool(p.kernel);
    d["mesh_kernel"] = bool(p.mesh_kernel);
    d["mesh_call"] = bool(p.mesh_call);
    d["array_kernel"] = bool(p.array_kernel);
    d["sharding_rule"] = bool(p.sharding_rule);
    d["local_plan"] = bool(p.local_plan);
    d["factors"] = bool(p.factors);
    d["vjp"] = bool(p.vjp) || bool(p.vjp_split);
    d["batch"] = bool(p.batch);
    d["cost"] = bool(p.cost);
    d["comm"] = bool(p.comm);
    d["comm_steps"] = bool(p.comm_steps);
    d["vma_rule"] = bool(p.vma_rule);
    // Declared traits the passes read instead of names (ir/primitive.h).
    d["layout_only"] = p.layout_only;
    d["partials_reduction"] = p.partials_reduction;
    d["bf16_widened_once"] = p.bf16_widened_once;
    d["regroups_dims"] = p.regroups_dims;
    d["unmapped_dims_keep_sharding"] = p.unmapped_dims_keep_sharding;
    d["retiles_through_other_dim"] = p.retiles_through_other_dim;
    d["fixed_result_specs"] = bool(p.fixed_result_specs);
    d["fused_into_readers"] = p.fused_into_readers;
    d["fuses_operands"] = p.fuses_operands;
    d["result_is_operand_view"] = p.result_is_operand_view;
    d["has_effects"] = p.has_effects;
    d["sub_program_params"] = py::tuple(py::cast(p.sub_program_params));
    d["sub_program_links"] = bool(p.sub_program_links);
    d["float_tile"] = bool(p.float_tile.loop);
    d["float_tile_dense_only"] = p.float_tile.dense_only;
    d["int_scalar_op"] = bool(p.int_scalar_op.op);
    d["xla_rewrite"] = bool(p.xla_rewrite);
    d["saved_as_dot"] = bool(p.saved_as_dot);
    d["print_rule"] = bool(p.print_rule);
    d["prints_as_call"] = p.prints_as_call;
    d["zero_derivative"] = p.zero_derivative;
    d["fma_product"] = bool(p.fma_product);
    d["fma_sum"] = p.fma_sum;
    d["commutative"] = p.commutative;
    d["moves_elements"] = p.moves_elements;
    return d;
  });
  // A control-flow equation's links to its sub-programs (Primitive::sub_program_links),
  // for passes that follow values through them: {"programs": [(program, in_operand,
  // in_result, out_result), ...], "stacked_operands", "stacked_results"} (-1 index:
  // none; the stacked indices are None when nothing is stacked); None for a
  // primitive that declares none.
  m.def("sub_program_links", [](const std::string& name, const py::dict& params) -> py::object {
    const std::optional<ControlFlowLinks> links = sub_program_links(primitive(name), to_params(params));
    if (!links) return py::none();
    py::list programs;
    for (const SubProgramLinks& l : links->programs)
      programs.append(py::make_tuple(l.program, l.in_operand, l.in_result, l.out_result));
    auto index = [](size_t i) -> py::object { return i == SIZE_MAX ? py::object(py::none()) : py::object(py::int_(i)); };
    py::dict d;
    d["programs"] = programs;
    d["stacked_operands"] = index(links->stacked_operands);
    d["stacked_results"] = index(links->stacked_results);
    return d;
  });
  // Runs Primitive::validate on a copy of a registered primitive with some of
  // its hooks removed (and its kind optionally changed): the registry test
  // checks that an inconsistent definition is rejected at registration.
  m.def("validate_primitive_without", [](const std::string& name, const std::vector<std::string>& drop) {
    Primitive p = primitive(name);
    for (const std::string& h : drop) {
      if (h == "kernel") p.kernel = nullptr;
      else if (h == "mesh_kernel") p.mesh_kernel = nullptr;
      else if (h == "mesh_call") p.mesh_call = nullptr;
      else if (h == "array_kernel") p.array_kernel = nullptr;
      else if (h == "comm") p.comm = nullptr;
      else if (h == "comm_steps") p.comm_steps = nullptr;
      else if (h == "passes_through") p.passes_through = false;
      else if (h == "kernel=identity") p.kernel = [](const Tensors& in, const Params&, const Avals&) { return in; };
      else if (h == "abstract_eval") p.abstract_eval = nullptr;
      else if (h == "kind=local") p.kind = Kind::Local;
      else if (h == "factors") p.factors = nullptr;
      else if (h == "elementwise") p.elementwise = false;
      else if (h == "xla_instruction") p.xla_instruction.clear();
      else if (h == "unmapped_dims_keep_sharding") p.unmapped_dims_keep_sharding = false;
      else if (h == "sub_program_links") p.sub_program_links = nullptr;
      else throw ValueError("unknown hook '" + h + "'");
    }
    p.validate();
  });
  // The type of one element along the leading axis (what a scan body sees of an x).
  m.def("element_aval", [](Aval a) {
    if (a.shape.empty()) throw ValueError("element_aval of a scalar");
    a.shape.erase(a.shape.begin());
    if (!a.spec.empty()) a.spec.erase(a.spec.begin());
    return a;
  });
}

}  // namespace meshsim
