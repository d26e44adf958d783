// The profiler's interface to a device backend (framework/ cannot call cuda/, which sits
// above it): the cuda backend registers a DeviceTimer that records an event pair per op on
// the op's stream and resolves the pairs in bulk, its allocator's byte counts, and calls the
// hooks below. Apart from profiler_hook.h so that the dispatch path never includes it.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "framework/profiler.h"

namespace hg::profiler_hook {

// One pair's span on the profiler's clock (ns since it started); -1 when it was not resolved.
struct DeviceSpan {
  int64_t start_ns = -1, dur_ns = -1;
  int stream = -1;  // 0: the device's default stream; then 1, 2... in the order first used
};

// Every call may throw hg::Error (a CUDA failure); the profiler then stops timing on the
// device and says why in DeviceTimingStats::error. Calls come from any recording thread.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  // A new session whose clock starts at t0: pairs are numbered from 0, and at most
  // `capacity` of them are recorded and not yet resolved at a time.
  virtual void begin(std::chrono::steady_clock::time_point t0, size_t capacity) = 0;
  // Records the start event of a new pair on `stream` (a cudaStream_t) of cuda:device.
  virtual int64_t start(int device, void* stream) = 0;
  // Records the end event of pair `pair` on `stream` of cuda:device (its last work's).
  virtual void end(int64_t pair, int device, void* stream) = 0;
  // Waits for every stream with recorded pairs: then the host clock is past their ends.
  virtual void synchronize() = 0;
  // Every pair's span by number, and the session's counts; ends the session.
  virtual std::vector<DeviceSpan> finish(DeviceTimingStats& stats) = 0;
};

// The backend's timer (nullptr: ops are timed on the host only). Set once at load time.
void register_device_timer(DeviceTimer* timer);

// The backend's hooks, called only while profiler_hook::recording(): device work about to be
// issued to `stream` (a cudaStream_t) of `device` for the open op (its kernel names come
// through note_kernel), and bytes a caching allocator took from (+) or gave back to (-) the driver.
void note_device_work(Device device, void* stream);
void on_reserve(int64_t delta);

// A device's caching allocator: bytes handed out to tensors and bytes held from the driver
// (in use plus cached). The backend registers how to read them; -1: unknown.
struct AllocatorBytes {
  int64_t in_use = -1, reserved = -1;
};
void register_allocator_bytes(AllocatorBytes (*query)(int device));

}  // namespace hg::profiler_hook
