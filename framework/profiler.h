// An op-level profiler in the manner of torch.profiler: while an hg::Profiler lives (until
// stop()), every op dispatch is recorded with its module path, dtypes, shapes, phase, time (for
// cuda ops also device time, from CUDA events), bytes allocated, FLOPs and kernel path; the
// result is a per-op table, a per-module table and a Chrome trace (chrome://tracing, Perfetto).
// The hooks cost one branch when off.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/device.h"
#include "framework/dtype.h"
#include "framework/shape.h"

namespace hg {

struct ProfileEvent {
  enum class Kind : uint8_t { op, range };
  Kind kind = Kind::op;
  std::string name;        // op: "relu", "conv2d_dgrad", "cast"; range: its name
  std::string stub;        // op: the dispatch stub ("unary"); range: ""
  std::string forward_op;  // backward: the node whose gradient ran ("conv2d"); else ""
  std::string module;      // module path ("down1.conv1"); "" outside any module
  bool backward = false;
  Device device;
  std::vector<DType> dtypes;  // the defined tensor arguments, in the kernel's order
  std::vector<Shape> shapes;
  std::string dtype;          // the floating dtypes among them ("f16"; a cast: "f32->f16")
  int64_t start_ns = 0;       // since the profiler started
  int64_t dur_ns = 0;         // host wall time (on cuda: issuing the work, see docs/profiler.md)
  // cuda ops: the op's work on the device, from a CUDA event pair recorded on its stream
  // before its first kernel (or copy) and after its last, on the same clock as start_ns
  // (0 ns at the host start for an op that issued no device work); -1 for cpu ops, and
  // where device timing failed (Profiler::device_timing().error).
  int64_t device_start_ns = -1;
  int64_t device_dur_ns = -1;
  int stream = -1;  // the pair's stream: 0 for the device's default stream, then 1, 2... as first used
  int64_t bytes_allocated = 0;  // allocated since the previous op of this thread ended
  int64_t live_bytes = 0;       // tensor memory in use when the event ended
  // Bytes the device allocator took from (+) or gave back to (-) the driver since the
  // previous op of this thread ended: cudaMalloc/cudaFree of the caching allocator.
  int64_t reserved_delta = 0;
  // cuda ops: the caching allocator of the op's device when the event ended: bytes handed
  // out to tensors (rounded to blocks) and bytes held from the driver (in use + cached).
  int64_t allocator_in_use = -1, allocator_reserved = -1;
  double flops = 0;             // multiply-adds count 2 (matmul, linear, conv2d); else 0
  std::string kernel;           // cpu: the ISA path ("avx2"); cuda: the kernels launched
  int thread = 0;               // 0 for the first thread that recorded, then 1, 2...
  int depth = 0;                // ops and ranges open around this one on its thread
  bool nested = false;          // an op dispatched inside another op (not counted twice)

  bool device_timed() const { return device_dur_ns >= 0; }
  // The time the tables count: device time where there is one, else host wall time.
  int64_t time_ns() const { return device_timed() ? device_dur_ns : dur_ns; }
};

// The events of one (op, phase, dtype), like torch's key_averages().
struct OpStats {
  std::string name, dtype, kernel, stub;
  bool backward = false;
  int64_t calls = 0;
  int64_t total_ns = 0, max_ns = 0;  // ProfileEvent::time_ns(): device time for cuda ops
  int64_t host_ns = 0;               // host wall time (for cuda ops: issuing the work)
  int64_t bytes_allocated = 0;
  int64_t reserved_delta = 0;
  double flops = 0;
  double gflops_per_s() const { return total_ns > 0 ? flops / static_cast<double>(total_ns) : 0.0; }
};

// The op time of one module path, forward and backward (ops outside modules: "(none)").
struct ModuleStats {
  std::string module;
  int64_t calls = 0;
  int64_t forward_ns = 0, backward_ns = 0;
  double flops = 0;
};

// How the cuda ops' device times were taken: event pairs from a pool, resolved at stop()
// with one wait per stream; a full pool is resolved early, and that wait is counted.
struct DeviceTimingStats {
  int64_t pairs = 0;         // event pairs recorded (one per cuda op that issued device work)
  int64_t anchor_syncs = 0;  // waits aligning a device's clock with the host's (one per device used)
  int64_t pool_flushes = 0;  // mid-session waits because every pair of the pool was in flight
  int64_t stop_syncs = 0;    // streams waited for at stop()
  std::string error;         // why device timing stopped early ("" when it did not)
};

struct ProfilerOptions {
  // Record only the calling thread's ops (a training step's table without the data
  // loader's ops) rather than every thread's.
  bool this_thread_only = false;
  // CUDA event pairs kept unresolved before the profiler waits for the device to reuse them.
  size_t device_event_pairs = 4096;
};

class Profiler {
 public:
  // Starts recording the ops of every thread, or only of the calling one; hg::Error when
  // another Profiler is recording (one at a time) or the options are invalid.
  explicit Profiler(bool this_thread_only = false) : Profiler(ProfilerOptions{.this_thread_only = this_thread_only}) {}
  explicit Profiler(const ProfilerOptions& options);
  ~Profiler();  // stops if still recording
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  void stop();  // idempotent
  bool recording() const { return recording_; }

  // After stop() (hg::Error while recording): events in start order, ops and ranges.
  const std::vector<ProfileEvent>& events() const;
  int64_t wall_ns() const;       // start to stop, less the ProfilePauses
  int64_t op_total_ns() const;   // the sum of time_ns() over top-level op events
  DeviceTimingStats device_timing() const;
  std::vector<OpStats> key_averages() const;        // by total time, largest first
  std::vector<ModuleStats> module_averages() const;  // by forward + backward time

  // Text tables, `rows` lines at most, with a header line giving wall and op time.
  std::string table(size_t rows = 25) const;
  std::string module_table(size_t rows = 25) const;
  // Trace event format JSON: "X" events (forward and backward of a thread on separate
  // tids; cuda ops' device time on a process per device, a track per stream, with a flow
  // arrow from each op's host span), "C" counters (tensor memory; per cuda device its
  // allocator's bytes in use and cached), "M" metadata naming processes and tracks.
  std::string chrome_trace() const;
  void write_chrome_trace(const std::string& path) const;  // atomically; hg::Error on failure

 private:
  const std::vector<ProfileEvent>& stopped(const char* what) const;
  bool recording_ = false;
  int64_t wall_ns_ = 0;
  std::vector<ProfileEvent> events_;
  DeviceTimingStats device_timing_;
};

// A named range on the active profiler's trace (like torch's record_function); nestable,
// free when no profiler records. `auto r = hg::profile_range("data");`
class ProfileRange {
 public:
  explicit ProfileRange(const char* name);
  explicit ProfileRange(const std::string& name) : ProfileRange(name.c_str()) {}
  ~ProfileRange();
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;

 private:
  bool active_ = false;
};
[[nodiscard]] inline ProfileRange profile_range(const std::string& name) { return ProfileRange(name); }

// Leaves a stretch out of the active profiler: instrumentation a benchmark runs inside the
// step it profiles (segbench's update probe). While it lives no op is recorded, on any
// thread, and its time is not counted in wall_ns() (the trace shows a gap). Free when no
// profiler records; a pause inside a pause does nothing. Use it between ops, not inside one.
class ProfilePause {
 public:
  ProfilePause();
  ~ProfilePause();
  ProfilePause(const ProfilePause&) = delete;
  ProfilePause& operator=(const ProfilePause&) = delete;

 private:
  bool active_ = false;
  std::chrono::steady_clock::time_point t0_;
};

// FLOPs of one dispatch from its stub and tensor arguments (shapes as the kernel gets
// them); 0 for ops that are not matrix products or convolutions.
double op_flops(const std::string& stub, const std::vector<Shape>& shapes);

}  // namespace hg
