#include "meshsim/runtime/timeline.h"

#include <chrono>
#include <mutex>

namespace meshsim::timeline {

std::atomic<int> g_sessions{0};

namespace {
std::mutex g_mutex;
std::vector<std::vector<TimelineEvent>> g_open;  // one list per open session, innermost last
thread_local int t_device = -1;
}  // namespace

int64_t now_ns() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin)
      .count();
}

void push_session() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_open.emplace_back();
  g_sessions.store(static_cast<int>(g_open.size()));
}

std::vector<TimelineEvent> pop_session() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_open.empty()) return {};
  std::vector<TimelineEvent> out = std::move(g_open.back());
  g_open.pop_back();
  g_sessions.store(static_cast<int>(g_open.size()));
  return out;
}

void record(TimelineEvent event) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_open.empty()) return;
  for (size_t i = 0; i + 1 < g_open.size(); ++i) g_open[i].push_back(event);
  g_open.back().push_back(std::move(event));
}

DeviceScope::DeviceScope(int device) : saved_(t_device) { t_device = device; }
DeviceScope::~DeviceScope() { t_device = saved_; }
int current_device() { return t_device < 0 ? 0 : t_device; }

HostSpan::HostSpan(const char* prefix, const std::string& name) {
  if (!active()) return;
  start_ = now_ns();
  name_ = name.empty() ? prefix : std::string(prefix) + "(" + name + ")";
}

HostSpan::~HostSpan() {
  if (start_ < 0) return;
  TimelineEvent e;
  e.name = std::move(name_);
  e.category = "host";
  e.start_ns = start_;
  e.dur_ns = now_ns() - start_;
  record(std::move(e));
}

}  // namespace meshsim::timeline
