// The profiler's timeline (meshsim.profiler): while a session is open, the
// runtime records what every simulated device ran and when.
//
// Recording is off unless a session is open: every hook is one branch on
// `timeline::active()` (a relaxed atomic load). Spans are recorded
//  - per primitive kernel run (interpreter.cpp's run_primitive), on the
//    device the current thread computes for (a `DeviceScope` set by the mesh
//    executor's and the sharded runtime's device tasks; device 0 otherwise),
//    with the primitive's cost (flops, bytes accessed: ir/primitive.h);
//  - per collective, on every device of its mesh, with its axes, replica
//    group and the bytes that device sends and receives (record_collective,
//    runtime/sharded.cpp);
//  - on the host: jitted program runs and Python's TraceAnnotations.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "meshsim/core/mesh.h"

namespace meshsim {

struct TimelineEvent {
  std::string name;
  std::string category;     // "op", "collective", "host"
  int device = -1;          // a device id; -1: the host
  int64_t start_ns = 0;     // since the process's first clock read
  int64_t dur_ns = 0;
  double flops = 0, bytes_accessed = 0;               // ops
  AxisNames axes;                                     // collectives
  std::vector<int> group;                             // the device's replica group (ids)
  int64_t bytes_sent = 0, bytes_received = 0;         // collectives
  int64_t steps = 0;                                  // collectives: latency steps
  std::vector<std::pair<std::string, std::string>> args;  // host annotations
};

namespace timeline {

extern std::atomic<int> g_sessions;
// Whether any session is open: the one branch every hook costs otherwise.
inline bool active() { return g_sessions.load(std::memory_order_relaxed) > 0; }

int64_t now_ns();
// Sessions nest (a user's trace and a cost estimate's run): each sees the
// events recorded while it is open.
void push_session();
std::vector<TimelineEvent> pop_session();
void record(TimelineEvent event);

// The device the current thread computes for while it lives (-1: none set).
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_;
};
int current_device();  // device 0 when no scope is set

// A host span from construction to destruction (only when a session is open).
class HostSpan {
 public:
  explicit HostSpan(const char* prefix, const std::string& name = "");
  ~HostSpan();

 private:
  int64_t start_ = -1;
  std::string name_;
};

}  // namespace timeline
}  // namespace meshsim
