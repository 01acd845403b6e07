// Bindings of sharding in types: ShardingTypeError, the collective log and
// the profiler's timeline.
#include "convert.h"
#include "meshsim/runtime/sharded.h"
#include "meshsim/runtime/timeline.h"

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
    for (const CollectiveRecord& r : pop_collective_recorder()) {
      py::dict sent, received;  // by device id
      for (size_t pos = 0; pos < r.device_ids.size(); ++pos) {
        sent[py::int_(r.device_ids[pos])] = r.sent[pos];
        received[py::int_(r.device_ids[pos])] = r.received[pos];
      }
      out.append(py::make_tuple(r.name, py::tuple(py::cast(r.axes)), r.bytes_per_device, sent, received,
                                r.steps));
    }
    return out;
  });
  // The profiler's timeline (runtime/timeline.h).
  m.def("push_timeline", &timeline::push_session);
  m.def("pop_timeline", [] {
    py::list out;
    for (const TimelineEvent& e : timeline::pop_session()) {
      py::dict args;
      for (const auto& [k, v] : e.args) args[py::str(k)] = v;
      if (e.category == "collective") args["steps"] = e.steps;  // the algorithm's latency terms
      out.append(py::make_tuple(e.name, e.category, e.device, e.start_ns, e.dur_ns, e.flops,
                                e.bytes_accessed, py::tuple(py::cast(e.axes)), py::tuple(py::cast(e.group)),
                                e.bytes_sent, e.bytes_received, args));
    }
    return out;
  });
  m.def("timeline_now_ns", &timeline::now_ns);
  m.def("timeline_active", &timeline::active);
  m.def("record_host_span", [](std::string name, int64_t start_ns, int64_t dur_ns,
                               std::vector<std::pair<std::string, std::string>> args) {
    TimelineEvent e;
    e.name = std::move(name);
    e.category = "host";
    e.start_ns = start_ns;
    e.dur_ns = dur_ns;
    e.args = std::move(args);
    timeline::record(std::move(e));
  });
}

}  // namespace meshsim
