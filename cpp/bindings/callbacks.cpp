// How a running program calls a Python function (jax.debug.callback, jax.debug.print,
// jax.pure_callback): the core calls the installed caller with the function's id, the
// operands as NumPy views and where the call runs.
#include "convert.h"
#include "meshsim/core/denormals.h"
#include "meshsim/core/runtime_error.h"
#include "meshsim/ir/host_callback.h"

namespace meshsim {
namespace py = pybind11;

void init_callbacks(py::module_& m) {
  // The rules of host_rule_collective: batch(rule, values, dims, size) -> (values, dims) and
  // vjp(rule, values, cotangents) -> cotangents (None: a symbolic zero).
  m.def("set_host_rules", [](const py::function& batch, const py::function& vjp) {
    auto* held_batch = new py::function(batch);  // kept for the life of the process
    auto* held_vjp = new py::function(vjp);
    HostRules rules;
    rules.batch = [held_batch](int64_t rule, const Values& in, const BatchDims& dims, int64_t size) {
      const DenormalsKept python_numerics;
      py::gil_scoped_acquire gil;
      py::list values;
      for (const Value& v : in) values.append(py_convert::from_value(v));
      py::list py_dims;
      for (int64_t d : dims) py_dims.append(d == kNotBatched ? py::object(py::none()) : py::object(py::int_(d)));
      py::tuple res = (*held_batch)(rule, values, py_dims, size);
      Batched out;
      for (const py::handle& v : res[0]) out.out.push_back(py_convert::to_value(v));
      for (const py::handle& d : res[1]) out.dims.push_back(d.is_none() ? kNotBatched : d.cast<int64_t>());
      return out;
    };
    rules.vjp = [held_vjp](int64_t rule, const Values& in, const Cotangents& ct) {
      const DenormalsKept python_numerics;
      py::gil_scoped_acquire gil;
      py::list values, cts;
      for (const Value& v : in) values.append(py_convert::from_value(v));
      for (const Cotangent& c : ct) cts.append(c ? py_convert::from_value(*c) : py::object(py::none()));
      py::list res = (*held_vjp)(rule, values, cts);
      Cotangents out;
      for (const py::handle& c : res) {
        if (c.is_none()) out.emplace_back(std::nullopt);
        else out.emplace_back(py_convert::to_value(c));
      }
      return out;
    };
    set_host_rules(std::move(rules));
  });

  m.def("set_host_caller", [](const py::function& caller) {
    // Kept for the life of the process: it is called until the interpreter exits.
    auto* held = new py::function(caller);
    set_host_caller([held](int64_t callback, const Tensors& args, const HostCallSite& site,
                           const Avals& out) {
      const DenormalsKept python_numerics;
      py::gil_scoped_acquire gil;
      try {
        py::list arrays;
        for (const Tensor& t : args) arrays.append(py_convert::tensor_to_numpy(t));
        py::object coords = site.device < 0 ? py::object(py::none()) : py::object(py::tuple(py::cast(site.coords)));
        py::list dtypes, shapes;
        for (const Aval& a : out) {
          dtypes.append(py_convert::to_numpy_dtype(a.dtype));
          shapes.append(py::tuple(py::cast(a.shape)));
        }
        py::object results = (*held)(callback, arrays, site.device, coords, dtypes, shapes);
        Tensors tensors;
        for (const py::handle& r : results)
          tensors.push_back(py_convert::tensor_from_numpy(py::reinterpret_borrow<py::array>(r)));
        return tensors;
      } catch (py::error_already_set& e) {
        // XLA's CPU runtime reports a failing host callback as an INTERNAL runtime error
        // carrying the Python traceback; inside a shard_map body we also name the device.
        py::list lines = py::module_::import("traceback").attr("format_exception")(
            e.type(), e.value(), e.trace());
        std::string traceback = py::str("").attr("join")(lines).cast<std::string>();
        if (!traceback.empty() && traceback.back() == '\n') traceback.pop_back();
        std::string where;
        if (site.device >= 0) {
          std::string coords;
          for (size_t i = 0; i < site.coords.size(); ++i)
            coords += (i ? ", " : "") + std::to_string(site.coords[i]);
          if (site.coords.size() == 1) coords += ",";
          where = " on cpu:" + std::to_string(site.device) + " at mesh coordinates (" + coords + ")";
        }
        fail<JaxRuntimeError>("INTERNAL: CpuCallback error calling callback", where, ": ", traceback);
      }
    });
  });
}

}  // namespace meshsim
