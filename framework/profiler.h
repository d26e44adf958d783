// An op-level profiler in the manner of torch.profiler: while an hg::Profiler lives (until
// stop()), every op dispatch is recorded with its module path, dtypes, shapes, phase, time,
// bytes allocated, FLOPs and kernel path; the result is a per-op table, a per-module table
// and a Chrome trace (chrome://tracing, Perfetto). The hooks cost one branch when off.
#pragma once
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
  int64_t dur_ns = 0;         // host wall time (on cuda: the launch, see docs/profiler.md)
  int64_t bytes_allocated = 0;  // allocated since the previous op of this thread ended
  int64_t live_bytes = 0;       // tensor memory in use when the event ended
  double flops = 0;             // multiply-adds count 2 (matmul, linear, conv2d); else 0
  std::string kernel;           // cpu: the ISA path ("avx2"); cuda: the kernels launched
  int thread = 0;               // 0 for the first thread that recorded, then 1, 2...
  int depth = 0;                // ops and ranges open around this one on its thread
  bool nested = false;          // an op dispatched inside another op (not counted twice)
};

// The events of one (op, phase, dtype), like torch's key_averages().
struct OpStats {
  std::string name, dtype, kernel, stub;
  bool backward = false;
  int64_t calls = 0;
  int64_t total_ns = 0, max_ns = 0;
  int64_t bytes_allocated = 0;
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

class Profiler {
 public:
  // Starts recording the ops of every thread, or only of the calling one (a training
  // step's table without the data loader's ops); hg::Error when another Profiler is
  // recording (one at a time).
  explicit Profiler(bool this_thread_only = false);
  ~Profiler();  // stops if still recording
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  void stop();  // idempotent
  bool recording() const { return recording_; }

  // After stop() (hg::Error while recording): events in start order, ops and ranges.
  const std::vector<ProfileEvent>& events() const;
  int64_t wall_ns() const;       // start to stop
  int64_t op_total_ns() const;   // the sum over top-level op events
  std::vector<OpStats> key_averages() const;        // by total time, largest first
  std::vector<ModuleStats> module_averages() const;  // by forward + backward time

  // Text tables, `rows` lines at most, with a header line giving wall and op time.
  std::string table(size_t rows = 25) const;
  std::string module_table(size_t rows = 25) const;
  // Trace event format JSON: "X" events (forward and backward of a thread on separate
  // tids), a "C" memory counter, "M" metadata naming process and tracks.
  std::string chrome_trace() const;
  void write_chrome_trace(const std::string& path) const;  // atomically; hg::Error on failure

 private:
  const std::vector<ProfileEvent>& stopped(const char* what) const;
  bool recording_ = false;
  int64_t wall_ns_ = 0;
  std::vector<ProfileEvent> events_;
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

// FLOPs of one dispatch from its stub and tensor arguments (shapes as the kernel gets
// them); 0 for ops that are not matrix products or convolutions.
double op_flops(const std::string& stub, const std::vector<Shape>& shapes);

}  // namespace hg
