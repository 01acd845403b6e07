// Bindings of the value types: ShapedArray (Aval), Array, Mesh, Sharding.
#include "convert.h"
#include "meshsim/kernels/library_dot_order.h"
#include "meshsim/runtime/dispatch.h"

namespace meshsim {
namespace py = pybind11;
using namespace py_convert;

namespace {

Spec to_spec(const std::vector<std::vector<std::string>>& entries) { return entries; }

void append_spec(std::string& out, const Spec& spec) {
  for (const AxisNames& entry : spec) out += spec_entry_str(entry) + ",";
}

// Everything that makes two arrays share a traced program: the Aval's fields
// and the placement, e.g. "f32~[64,64,]{}{U:}{R:}[]|mesh 0 []|device 0". Built without
// streams: a jitted call computes it once for each array it has not seen.
std::string jit_signature(const Array& a) {
  const Aval& v = a.aval();
  const Sharding& s = *a.sharding();
  std::string out = dtype_short_name(v.dtype);
  if (v.weak_type) out += "~";
  out += "[";
  for (int64_t d : v.shape) out += std::to_string(d) + ",";
  out += "]{";
  for (const std::string& axis : v.vma) out += axis + ",";
  out += "}{U:";
  for (const std::string& axis : v.unreduced) out += axis + ",";
  out += "}{R:";
  for (const std::string& axis : v.reduced) out += axis + ",";
  out += "}[";
  append_spec(out, v.spec);
  out += "]|mesh " + std::to_string(reinterpret_cast<uintptr_t>(s.mesh.get())) + " [";
  append_spec(out, s.spec);
  out += "]|device " + std::to_string(s.device);
  return out;
}

}  // namespace

void init_arrays(py::module_& m) {
  py::enum_<AxisType>(m, "AxisType")
      .value("Auto", AxisType::Auto)
      .value("Explicit", AxisType::Explicit)
      .value("Manual", AxisType::Manual);

  py::class_<Mesh, MeshPtr>(m, "MeshCore")
      .def(py::init(&make_mesh_checked), py::arg("axis_names"), py::arg("axis_sizes"),
           py::arg("axis_types"), py::arg("device_ids"))
      .def_readonly("axis_names", &Mesh::axis_names)
      .def_readonly("axis_sizes", &Mesh::axis_sizes)
      .def_readonly("axis_types", &Mesh::axis_types)
      .def_readonly("device_ids", &Mesh::device_ids)
      .def("__str__", &Mesh::str);

  py::class_<Aval>(m, "ShapedArray")
      .def(py::init([](const Shape& shape, const py::handle& dtype, bool weak_type, ShardingPtr sharding) {
             return placed_aval(shape, to_dtype(dtype), weak_type, sharding);
           }),
           py::arg("shape"), py::arg("dtype"), py::arg("weak_type") = false,
           py::arg("sharding") = nullptr)
      .def_property_readonly("shape", [](const Aval& a) { return py::tuple(py::cast(a.shape)); })
      .def_property_readonly("dtype", [](const Aval& a) { return to_numpy_dtype(a.dtype); })
      .def_property_readonly("ndim", &Aval::ndim)
      .def_property_readonly("size", [](const Aval& a) { return num_elements(a.shape); })
      .def_readonly("weak_type", &Aval::weak_type)
      .def_property_readonly("vma", [](const Aval& a) {
        return py::module_::import("builtins").attr("frozenset")(py::cast(a.vma));
      })
      .def_property_readonly("spec", [](const Aval& a) { return py::cast(a.spec); })
      // Pending reductions, in mesh order (JAX's {U:x} and {R:x}).
      .def_property_readonly("unreduced", [](const Aval& a) { return py::tuple(py::cast(a.unreduced)); })
      .def_property_readonly("reduced", [](const Aval& a) { return py::tuple(py::cast(a.reduced)); })
      .def_property_readonly("mesh", [](const Aval& a) { return a.mesh; })
      .def("str_short", &Aval::str_short, py::arg("short_dtypes") = false)
      // One example of a batch (vmap); a batch split over manual axes (spmd_axis_name
      // inside a shard_map body) varies over them, its examples do not.
      .def("without_dim", [](const Aval& a, int64_t d, const std::vector<std::string>& not_varying) {
        if (d < 0 || d >= a.ndim()) throw py::index_error("dimension out of range");
        Aval r = a;
        r.shape.erase(r.shape.begin() + d);
        if (!r.spec.empty()) r.spec.erase(r.spec.begin() + d);
        r.vma.erase(std::remove_if(r.vma.begin(), r.vma.end(), [&](const std::string& n) {
                      return std::find(not_varying.begin(), not_varying.end(), n) != not_varying.end();
                    }),
                    r.vma.end());
        return r;
      }, py::arg("dim"), py::arg("not_varying") = std::vector<std::string>{})
      .def("__str__", &Aval::str)
      .def("__repr__", &Aval::repr)
      .def("__eq__", [](const Aval& a, const Aval& b) { return a.same_type(b); })
      .def("__hash__", [](const Aval& a) { return py::hash(py::str(a.repr() + a.str())); });

  py::class_<Sharding, ShardingPtr>(m, "ShardingCore")
      .def(py::init([](MeshPtr mesh, const std::vector<std::vector<std::string>>& spec, int device) {
             auto s = std::make_shared<Sharding>();
             s->mesh = std::move(mesh);
             s->spec = to_spec(spec);
             s->device = device;
             return s;
           }),
           py::arg("mesh"), py::arg("spec"), py::arg("device") = 0)
      .def_readonly("mesh", &Sharding::mesh)
      .def_readonly("spec", &Sharding::spec)
      .def_readonly("device", &Sharding::device)
      .def("local_shape", [](const Sharding& s, const Shape& g) { return py::tuple(py::cast(s.local_shape(g))); })
      .def("block_index", &Sharding::block_index);

  m.def("check_spec", &check_spec, py::arg("mesh"), py::arg("spec"), py::arg("ndim"));

  py::class_<Array, ArrayPtr>(m, "ArrayImpl", py::dynamic_attr())  // named as JAX names its arrays
      .def_static(
          "from_numpy",
          [](const py::array& a, bool weak_type) {
            return Array::from_tensor(tensor_from_numpy(a), weak_type);
          },
          py::arg("array"), py::arg("weak_type") = false)
      .def_property_readonly("aval", &Array::aval, py::return_value_policy::copy)
      .def_property_readonly("shape", [](const Array& a) { return py::tuple(py::cast(a.aval().shape)); })
      .def_property_readonly("dtype", [](const Array& a) { return to_numpy_dtype(a.aval().dtype); })
      .def_property_readonly("ndim", [](const Array& a) { return a.aval().ndim(); })
      .def_property_readonly("size", [](const Array& a) { return num_elements(a.aval().shape); })
      .def_property_readonly("weak_type", [](const Array& a) { return a.aval().weak_type; })
      .def_property_readonly("sharding_core", &Array::sharding)
      // What a jit cache keys on: the full type plus where the array lives. Both
      // are fixed for an array's lifetime, so the key is built once per array and
      // kept in its instance dict (a jitted call reads it for every argument).
      .def_property_readonly("signature", [](py::handle self) -> py::object {
        static PyObject* name = PyUnicode_InternFromString("_signature");  // lives forever
        PyObject* dict = PyObject_GenericGetDict(self.ptr(), nullptr);
        if (!dict) throw py::error_already_set();
        py::dict cache = py::reinterpret_steal<py::dict>(dict);
        if (PyObject* hit = PyDict_GetItemWithError(dict, name))
          return py::reinterpret_borrow<py::object>(hit);
        if (PyErr_Occurred()) throw py::error_already_set();
        py::str key(jit_signature(self.cast<const Array&>()));
        cache[py::handle(name)] = key;
        return key;
      })
      .def("shard_data", [](const Array& a) {
        a.wait();
        py::list out;
        for (const Tensor& t : a.shards()) out.append(tensor_to_numpy(t));
        return out;
      })
      .def("distinct_buffers", [](const Array& a) {
        std::vector<const Storage*> seen;
        for (const Tensor& t : a.shards())
          if (std::find(seen.begin(), seen.end(), t.storage().get()) == seen.end())
            seen.push_back(t.storage().get());
        return seen.size();
      })
      .def("to_numpy", [](const Array& a) {
        if (!a.aval().unreduced.empty())  // partial sums: no device holds the value
          fail<NotImplementedError>("device_indices_map doesn't work with unreduced. Please file a bug at "
                                    "https://github.com/jax-ml/jax/issues");
        a.wait();  // with the GIL: interruptible
        Tensor g;
        {
          py::gil_scoped_release nogil;
          g = a.global();
        }
        return tensor_to_numpy(g);
      })
      .def("is_deleted", &Array::is_deleted)
      .def("delete", &Array::mark_deleted)
      .def("is_ready", [](const Array& a) {
        if (a.is_deleted()) throw std::runtime_error("INVALID_ARGUMENT: Array has been deleted.");
        return a.is_ready();
      })
      // Waits for the value; raises the error computing it raised. Returns the array.
      .def("block_until_ready", [](py::object self) {
        const Array& a = self.cast<const Array&>();
        if (a.is_deleted())
          throw std::runtime_error(
              "INVALID_ARGUMENT: BlockHostUntilReady() called on deleted or donated buffer");
        a.shards();
        return self;
      })
      .def_static("shard", [](const py::array& value, ShardingPtr sharding, bool weak_type) {
        return shard_array(tensor_from_numpy(value), std::move(sharding), weak_type);
      })
      .def("reshard", [](const ArrayPtr& a, ShardingPtr sharding) {
        py::gil_scoped_release nogil;
        return dispatch_reshard(a, std::move(sharding));
      });

  m.def("set_async_dispatch", &set_async_dispatch, py::arg("enabled"));
  m.def("set_library_dot_order_enabled", &set_library_dot_order_enabled, py::arg("enabled"));
  m.def("async_dispatch_enabled", &async_dispatch_enabled);
  m.def("wait_all_dispatched", &wait_all_dispatched, py::call_guard<py::gil_scoped_release>());
  m.def("push_dispatch_recorder", &push_dispatch_recorder);
  m.def("pop_dispatch_recorder", [] {
    py::list out;
    for (const DispatchRecord& r : pop_dispatch_recorder())
      out.append(py::dict(py::arg("name") = r.name, py::arg("devices") = py::tuple(py::cast(r.devices)),
                          py::arg("stream") = r.stream, py::arg("start") = r.start,
                          py::arg("end") = r.end, py::arg("failed") = r.failed));
    return out;
  });
  m.def("num_dispatch_streams", &num_dispatch_streams);
  // A thread holding the GIL lets it go while it waits for a value, taking it
  // back every few milliseconds to run signal handlers: Ctrl-C raises
  // KeyboardInterrupt out of the wait and cancels the programs dispatched so
  // far, which stop at their next check point (their results raise Cancelled).
  set_blocking_wait([](const WaitFor& wait_for) {
    if (!Py_IsInitialized() || !PyGILState_Check()) {
      while (!wait_for(std::chrono::hours(1))) {
      }
      return;
    }
    for (;;) {
      bool ready;
      {
        py::gil_scoped_release nogil;
        ready = wait_for(std::chrono::milliseconds(20));
      }
      if (ready) return;
      if (PyErr_CheckSignals() != 0) {
        py::error_already_set interrupt;  // takes the pending Python exception
        {
          py::gil_scoped_release nogil;
          cancel_dispatched();
          wait_for(std::chrono::milliseconds(50));  // let the devices unwind
        }
        throw interrupt;
      }
    }
  });
}

}  // namespace meshsim
