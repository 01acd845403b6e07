// Bindings of sharding in types: ShardingTypeError and the collective log.
#include "convert.h"
#include "meshsim/runtime/sharded.h"

namespace meshsim {
namespace py = pybind11;

void init_sharding(py::module_& m) {
  // A ValueError subclass; meshsim.sharding re-exports it.
  static py::handle error = py::exception<ShardingTypeError>(m, "ShardingTypeError", PyExc_ValueError);
  // Registered after the module's translator, so it is tried first.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ShardingTypeError& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  m.def("push_collective_recorder", &push_collective_recorder);
  m.def("pop_collective_recorder", [] {
    py::list out;
    for (const CollectiveRecord& r : pop_collective_recorder())
      out.append(py::make_tuple(r.name, py::tuple(py::cast(r.axes)), r.bytes_per_device));
    return out;
  });
}

}  // namespace meshsim
