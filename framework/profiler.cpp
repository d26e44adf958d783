// Recording for hg::Profiler: the out-of-line halves of the hooks in profiler_hook.h. Events
// go to one process-wide list under a mutex (the dispatching threads are few); the per-thread
// state (open ops and ranges, bytes allocated since the last op) is thread_local. cuda ops
// get an event pair from the backend's timer at their first device work (profiler_timing.h).
#include "framework/profiler.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "framework/allocator.h"
#include "framework/autograd.h"
#include "framework/cpu/isa.h"
#include "framework/error.h"
#include "framework/profiler_device.h"
#include "framework/profiler_hook.h"
#include "framework/profiler_timing.h"
#include "framework/tensor.h"

namespace hg {

namespace profiler_hook {

std::atomic<bool> g_recording{false};

struct OpRecord {
  ProfileEvent ev;
  std::chrono::steady_clock::time_point t0;
  int64_t pair = -1;       // the DeviceTimer's pair, from the op's first device work
  void* stream = nullptr;  // where its last device work went
};

namespace {

std::mutex g_mu;  // guards everything below it
Profiler* g_owner = nullptr;
std::vector<ProfileEvent>* g_sink = nullptr;
std::chrono::steady_clock::time_point g_t0;
int g_threads = 0;
int64_t g_paused_ns = 0;  // ProfilePauses of the recording profiler
std::atomic<int64_t> g_live{0};
// The one thread that records, or no thread id: all threads record.
std::atomic<std::thread::id> g_only_thread{};

// The hot paths load the flag relaxed; the slow path pairs with the release store in
// Profiler() so that a thread which saw the flag also sees the start time and sink.
bool this_thread_records() {
  std::atomic_thread_fence(std::memory_order_acquire);
  const std::thread::id only = g_only_thread.load(std::memory_order_relaxed);
  return only == std::thread::id() || only == std::this_thread::get_id();
}

struct ThreadState {
  int index = -1;
  int depth = 0;      // open ops and ranges
  int op_depth = 0;   // open ops
  int64_t pending_alloc = 0;
  int64_t pending_reserve = 0;
  std::vector<OpRecord*> open_ops;
};
thread_local ThreadState t_state;

int thread_index() {
  if (t_state.index < 0) {
    std::lock_guard<std::mutex> lock(g_mu);
    t_state.index = g_threads++;
  }
  return t_state.index;
}

int64_t since_start(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - g_t0).count();
}

// The context every event carries: phase, forward op and module path.
void fill_context(ProfileEvent& ev) {
  ev.thread = thread_index();
  ev.depth = t_state.depth;
  if (const Node* node = autograd::running_node()) {
    ev.backward = true;
    ev.forward_op = node->name();
    ev.module = node->module_path();
  } else {
    ev.module = autograd::current_module_path();
  }
}

void commit(ProfileEvent&& ev, int64_t pair = -1) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_sink) return;
  if (pair >= 0) timing::committed(g_sink->size(), pair);
  g_sink->push_back(std::move(ev));
}

std::string dtype_summary(const ProfileEvent& ev) {
  std::string out;
  if (ev.stub == "copy" && ev.dtypes.size() == 2 && ev.dtypes[0] != ev.dtypes[1])
    return std::string(dtype_name(ev.dtypes[1])) + "->" + dtype_name(ev.dtypes[0]);  // copy(dst, src)
  std::vector<DType> seen;
  for (DType d : ev.dtypes) {
    if (!is_floating(d)) continue;
    bool dup = false;
    for (DType s : seen) dup = dup || s == d;
    if (dup) continue;
    seen.push_back(d);
    if (!out.empty()) out += ",";
    out += dtype_name(d);
  }
  return out.empty() && !ev.dtypes.empty() ? dtype_name(ev.dtypes[0]) : out;
}

}  // namespace

OpScope::OpScope(const char* stub, Device device) : rec_(this_thread_records() ? new OpRecord : nullptr) {
  if (!rec_) return;
  ProfileEvent& ev = rec_->ev;
  ev.kind = ProfileEvent::Kind::op;
  ev.stub = stub;
  ev.name = stub;
  ev.device = device;
  ev.nested = t_state.op_depth > 0;
  fill_context(ev);
  ev.kernel = device.is_cpu() ? cpu::isa_name(cpu::isa()) : "";
  t_state.open_ops.push_back(rec_);
  ++t_state.depth;
  ++t_state.op_depth;
}

void OpScope::tensor(const Tensor& t) {
  if (!rec_ || !t.defined()) return;
  rec_->ev.dtypes.push_back(t.dtype());
  rec_->ev.shapes.push_back(t.shape());
}

void OpScope::tensors(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) tensor(t);
}

void OpScope::label(const char* variant) {
  if (rec_) rec_->ev.name = variant;
}

void OpScope::start() {
  if (rec_) rec_->t0 = std::chrono::steady_clock::now();
}

OpScope::~OpScope() {
  if (!rec_) return;
  // The end event first: the op's device work is issued by now, and the host span then
  // contains the device span wherever the device is the host (the emulation).
  if (rec_->pair >= 0) timing::end(rec_->pair, rec_->ev.device, rec_->stream);
  auto t1 = std::chrono::steady_clock::now();
  --t_state.depth;
  --t_state.op_depth;
  t_state.open_ops.pop_back();
  ProfileEvent& ev = rec_->ev;
  ev.start_ns = since_start(rec_->t0);
  ev.dur_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - rec_->t0).count();
  ev.bytes_allocated += t_state.pending_alloc;
  t_state.pending_alloc = 0;
  ev.reserved_delta += t_state.pending_reserve;
  t_state.pending_reserve = 0;
  ev.live_bytes = g_live.load(std::memory_order_relaxed);
  if (ev.device.is_cuda()) {
    timing::allocator_bytes(ev);
    if (rec_->pair < 0 && timing::on()) {
      ev.device_start_ns = ev.start_ns;  // no device work: none of the device's time
      ev.device_dur_ns = 0;
    }
  }
  ev.dtype = dtype_summary(ev);
  if (ev.stub == "copy" && ev.dtype.find("->") != std::string::npos) ev.name = "cast";
  ev.flops = op_flops(ev.stub, ev.shapes);
  commit(std::move(ev), rec_->pair);
  delete rec_;
}

void on_alloc(size_t nbytes) {
  g_live.fetch_add(static_cast<int64_t>(nbytes), std::memory_order_relaxed);
  if (!t_state.open_ops.empty()) t_state.open_ops.back()->ev.bytes_allocated += static_cast<int64_t>(nbytes);
  else t_state.pending_alloc += static_cast<int64_t>(nbytes);
}

void on_free(size_t nbytes) { g_live.fetch_sub(static_cast<int64_t>(nbytes), std::memory_order_relaxed); }

void on_reserve(int64_t delta) {
  if (!t_state.open_ops.empty()) t_state.open_ops.back()->ev.reserved_delta += delta;
  else t_state.pending_reserve += delta;
}

void note_kernel(const char* name) {
  if (t_state.open_ops.empty()) return;
  std::string& k = t_state.open_ops.back()->ev.kernel;
  if (k.find(name) != std::string::npos) return;
  if (!k.empty()) k += " + ";
  k += name;
}

void note_device_work(Device device, void* stream) {
  // The work is part of every open op of that device: outer ops' pairs start first.
  for (OpRecord* op : t_state.open_ops) {
    if (op->ev.device != device) continue;
    if (op->pair < 0) op->pair = timing::start(device, stream);
    op->stream = stream;
  }
}

// A range open on this thread: its event is completed when it closes.
namespace {
thread_local std::vector<std::pair<ProfileEvent, std::chrono::steady_clock::time_point>> t_ranges;

void open_range(std::string name) {
  ProfileEvent ev;
  ev.kind = ProfileEvent::Kind::range;
  ev.name = std::move(name);
  fill_context(ev);
  ++t_state.depth;
  t_ranges.emplace_back(std::move(ev), std::chrono::steady_clock::now());
}

void close_range() {
  auto t1 = std::chrono::steady_clock::now();
  --t_state.depth;
  auto [ev, t0] = std::move(t_ranges.back());
  t_ranges.pop_back();
  ev.start_ns = since_start(t0);
  ev.dur_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  ev.live_bytes = g_live.load(std::memory_order_relaxed);
  commit(std::move(ev));
}
}  // namespace

void NodeScope::begin(const Node& node) {
  if (!this_thread_records()) return;
  open_range(node.name() + "_backward");
  active_ = true;
}

void NodeScope::end() { close_range(); }

}  // namespace profiler_hook

namespace {
int64_t device_in_use(Device d) {
  try {
    return memory_stats(d).in_use;
  } catch (const Error&) {
    return 0;  // no such device in this build
  }
}
}  // namespace

Profiler::Profiler(const ProfilerOptions& options) {
  using namespace profiler_hook;
  HG_CHECK(options.device_event_pairs >= 1, "hg::Profiler: ProfilerOptions::device_event_pairs is 0; it must be at "
           "least 1 (the default, 4096, is resolved at stop() without waiting on the device in a step)");
  std::lock_guard<std::mutex> lock(g_mu);
  HG_CHECK(g_owner == nullptr,
           "hg::Profiler: another Profiler is already recording; stop() it before starting a new one");
  g_live.store(device_in_use(Device::cpu()) + device_in_use(Device::cuda(0)));
  g_only_thread.store(options.this_thread_only ? std::this_thread::get_id() : std::thread::id());
  g_t0 = std::chrono::steady_clock::now();
  g_paused_ns = 0;
  timing::begin(g_t0, options.device_event_pairs);
  g_owner = this;
  g_sink = &events_;
  recording_ = true;
  g_recording.store(true, std::memory_order_release);
}

Profiler::~Profiler() { stop(); }

void Profiler::stop() {
  using namespace profiler_hook;
  if (!recording_) return;
  g_recording.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_mu);
  // The device's work is waited for first, so that it lies inside the profiled wall time.
  timing::synchronize();
  wall_ns_ = since_start(std::chrono::steady_clock::now()) - g_paused_ns;
  device_timing_ = timing::finish(events_);
  g_owner = nullptr;
  g_sink = nullptr;
  recording_ = false;
  std::stable_sort(events_.begin(), events_.end(),
                   [](const ProfileEvent& a, const ProfileEvent& b) { return a.start_ns < b.start_ns; });
}

DeviceTimingStats Profiler::device_timing() const {
  stopped("device_timing");
  return device_timing_;
}

const std::vector<ProfileEvent>& Profiler::stopped(const char* what) const {
  HG_CHECK(!recording_, "hg::Profiler::", what, ": the profiler is still recording; call stop() first");
  return events_;
}

const std::vector<ProfileEvent>& Profiler::events() const { return stopped("events"); }

int64_t Profiler::wall_ns() const {
  stopped("wall_ns");
  return wall_ns_;
}

ProfilePause::ProfilePause() {
  using namespace profiler_hook;
  if (!recording()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_owner == nullptr || !g_recording.load(std::memory_order_relaxed)) return;
  g_recording.store(false, std::memory_order_relaxed);
  active_ = true;
  t0_ = std::chrono::steady_clock::now();
}

ProfilePause::~ProfilePause() {
  using namespace profiler_hook;
  if (!active_) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_owner == nullptr) return;  // stopped during the pause: it ended there
  g_paused_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
  g_recording.store(true, std::memory_order_release);
}

ProfileRange::ProfileRange(const char* name) {
  if (!profiler_hook::recording() || !profiler_hook::this_thread_records()) return;
  profiler_hook::open_range(name);
  active_ = true;
}

ProfileRange::~ProfileRange() {
  if (active_) profiler_hook::close_range();
}

}  // namespace hg
