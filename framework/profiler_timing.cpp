// The device half of hg::Profiler's recording (framework/profiler_timing.h): the backend's
// DeviceTimer and allocator query, registered at load time, and one session per profiler.
// Its own mutex, taken after profiler.cpp's when both are held (commit, stop), never before.
#include "framework/profiler_timing.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <utility>

#include "framework/profiler_device.h"

namespace hg::profiler_hook {

namespace {
DeviceTimer* g_timer = nullptr;
AllocatorBytes (*g_allocator_bytes)(int device) = nullptr;

std::mutex g_mu;  // guards everything below it
bool g_session = false;  // g_timer->begin() was called for the recording profiler
std::string g_error;     // why timing stopped in this session
std::vector<std::pair<size_t, int64_t>> g_pairs;  // (event index, pair) of committed events
std::atomic<bool> g_on{false};

void failed(const char* what) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_on.exchange(false)) g_error = what;
}
}  // namespace

void register_device_timer(DeviceTimer* timer) { g_timer = timer; }
void register_allocator_bytes(AllocatorBytes (*query)(int device)) { g_allocator_bytes = query; }

namespace timing {

void begin(std::chrono::steady_clock::time_point t0, size_t capacity) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_pairs.clear();
  g_error.clear();
  if (g_timer) g_timer->begin(t0, capacity);
  g_session = g_timer != nullptr;
  g_on.store(g_session);
}

bool on() { return g_on.load(std::memory_order_relaxed); }

int64_t start(Device device, void* stream) {
  if (!on()) return -1;
  try {
    return g_timer->start(device.index, stream);
  } catch (const std::exception& e) {
    failed(e.what());
    return -1;
  }
}

void end(int64_t pair, Device device, void* stream) noexcept {
  if (!on()) return;
  try {
    g_timer->end(pair, device.index, stream);
  } catch (const std::exception& e) {
    failed(e.what());
  }
}

void allocator_bytes(ProfileEvent& ev) noexcept {
  if (!g_allocator_bytes) return;
  try {
    const AllocatorBytes b = g_allocator_bytes(ev.device.index);
    ev.allocator_in_use = b.in_use;
    ev.allocator_reserved = b.reserved;
  } catch (const std::exception&) {
    ev.allocator_in_use = ev.allocator_reserved = -1;
  }
}

void committed(size_t index, int64_t pair) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_session) g_pairs.emplace_back(index, pair);
}

void synchronize() noexcept {
  if (!on()) return;
  try {
    g_timer->synchronize();
  } catch (const std::exception& e) {
    failed(e.what());
  }
}

DeviceTimingStats finish(std::vector<ProfileEvent>& events) {
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceTimingStats stats;
  if (!g_session) return stats;
  g_session = false;
  g_on.store(false);
  std::vector<DeviceSpan> spans;
  try {
    spans = g_timer->finish(stats);
  } catch (const std::exception& e) {
    if (g_error.empty()) g_error = e.what();
  }
  stats.error = g_error;
  // A table mixing device and host times for cuda ops would mislead: all or none.
  if (!stats.error.empty()) {
    for (ProfileEvent& e : events) e.device_start_ns = e.device_dur_ns = -1;
    return stats;
  }
  for (const auto& [index, pair] : g_pairs) {
    if (index >= events.size() || pair < 0 || static_cast<size_t>(pair) >= spans.size()) continue;
    const DeviceSpan& s = spans[static_cast<size_t>(pair)];
    events[index].device_start_ns = s.start_ns;
    events[index].device_dur_ns = s.dur_ns;
    events[index].stream = s.stream;
  }
  g_pairs.clear();
  return stats;
}

}  // namespace timing
}  // namespace hg::profiler_hook
