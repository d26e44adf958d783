// CUDA-event timing of hg::Profiler's cuda ops (framework/profiler_device.h): a pool of
// event pairs recorded on the ops' streams and resolved with one wait per stream, at stop()
// or when the pool is full; each device's clock is aligned with the host's once per session.
#include "cuda/profiler_events.h"

#include <cmath>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda/cuda_api.h"
#include "cuda/runtime.h"
#include "framework/profiler_device.h"
#include "framework/profiler_hook.h"

namespace hg::cuda {
namespace {

using Clock = std::chrono::steady_clock;
using profiler_hook::DeviceSpan;

struct Pair {
  cudaEvent_t start = nullptr, end = nullptr;  // made on `device`, reused across sessions
  int device = 0;
  int64_t number = -1;            // in the session; -1: free
  cudaStream_t stream = nullptr;  // the end event's stream
  int stream_index = 0;           // the start event's stream, numbered per device
  uint64_t end_order = 0;         // 0: not ended yet
};

// A device event recorded on an idle stream at a known host time: device times are
// measured from it.
struct Anchor {
  cudaEvent_t event = nullptr;
  int64_t host_ns = 0;
  bool set = false;
};

class EventTimer final : public profiler_hook::DeviceTimer {
 public:
  void begin(Clock::time_point t0, size_t capacity) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto devices = static_cast<size_t>(device_count());
    free_.resize(devices);
    anchors_.resize(devices);
    streams_.assign(devices, {nullptr});
    for (Anchor& a : anchors_) a.set = false;
    // Pairs a failed session left unresolved: their events are recorded afresh when reused.
    for (const auto& [number, slot] : slot_of_) release(slot);
    slot_of_.clear();
    t0_ = t0;
    capacity_ = capacity;
    spans_.clear();
    stats_ = {};
    active_ = true;
  }

  int64_t start(int device, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_) return -1;
    const DeviceGuard guard(device);
    const auto s = static_cast<cudaStream_t>(stream);
    if (!anchors_[static_cast<size_t>(device)].set) anchor(device, s);
    const size_t slot = take_slot(device);
    Pair& p = pool_[slot];
    HG_CUDA_CHECK(cudaEventRecord(p.start, s));
    p.number = static_cast<int64_t>(spans_.size());
    p.stream_index = stream_index(device, s);
    p.end_order = 0;
    spans_.emplace_back();
    slot_of_[p.number] = slot;
    ++stats_.pairs;
    return p.number;
  }

  void end(int64_t pair, int device, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = slot_of_.find(pair);
    if (!active_ || it == slot_of_.end()) return;
    Pair& p = pool_[it->second];
    const DeviceGuard guard(device);
    p.stream = static_cast<cudaStream_t>(stream);
    HG_CUDA_CHECK(cudaEventRecord(p.end, p.stream));
    p.end_order = ++ends_;
  }

  void synchronize() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.stop_syncs += wait_for_ended();
  }

  std::vector<DeviceSpan> finish(DeviceTimingStats& stats) override {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = false;
    stats = stats_;
    resolve_ended();
    // Pairs of ops still open on other threads never get their end: their slots are freed.
    for (const auto& [number, slot] : slot_of_) release(slot);
    slot_of_.clear();
    return std::move(spans_);
  }

 private:
  void anchor(int device, cudaStream_t s) {
    Anchor& a = anchors_[static_cast<size_t>(device)];
    if (!a.event) HG_CUDA_CHECK(cudaEventCreate(&a.event));
    HG_CUDA_CHECK(cudaEventRecord(a.event, s));  // completes after the work already on the stream
    HG_CUDA_CHECK(cudaEventSynchronize(a.event));
    ++stats_.anchor_syncs;
    a.host_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count();
    HG_CUDA_CHECK(cudaEventRecord(a.event, s));  // the stream is idle: it completes at once
    a.set = true;
  }

  // A free pair made on `device`; with `capacity_` pairs unresolved, the ended ones are
  // waited for and resolved first (a pool flush: the one wait on the device mid-session).
  size_t take_slot(int device) {
    if (slot_of_.size() >= capacity_) {
      wait_for_ended();
      resolve_ended();
      ++stats_.pool_flushes;
    }
    std::vector<size_t>& free = free_[static_cast<size_t>(device)];
    if (!free.empty()) {
      const size_t slot = free.back();
      free.pop_back();
      return slot;
    }
    Pair p;
    p.device = device;
    HG_CUDA_CHECK(cudaEventCreate(&p.start));
    HG_CUDA_CHECK(cudaEventCreate(&p.end));
    pool_.push_back(p);
    return pool_.size() - 1;
  }

  void release(size_t slot) {
    pool_[slot].number = -1;
    free_[static_cast<size_t>(pool_[slot].device)].push_back(slot);
  }

  int stream_index(int device, cudaStream_t s) {
    std::vector<cudaStream_t>& seen = streams_[static_cast<size_t>(device)];
    for (size_t i = 0; i < seen.size(); ++i)
      if (seen[i] == s) return static_cast<int>(i);
    seen.push_back(s);
    return static_cast<int>(seen.size() - 1);
  }

  // One wait per stream, on the last end recorded there: work on a stream runs in order.
  int64_t wait_for_ended() {
    std::map<std::pair<int, cudaStream_t>, const Pair*> last;
    for (const auto& [number, slot] : slot_of_) {
      const Pair& p = pool_[slot];
      if (p.end_order == 0) continue;
      const Pair*& l = last[{p.device, p.stream}];
      if (!l || l->end_order < p.end_order) l = &p;
    }
    for (const auto& [stream, p] : last) HG_CUDA_CHECK(cudaEventSynchronize(p->end));
    return static_cast<int64_t>(last.size());
  }

  // Spans of the ended pairs (their work is done), whose slots become free.
  void resolve_ended() {
    for (auto it = slot_of_.begin(); it != slot_of_.end();) {
      Pair& p = pool_[it->second];
      if (p.end_order == 0) {
        ++it;
        continue;
      }
      const Anchor& a = anchors_[static_cast<size_t>(p.device)];
      float since_anchor = 0, dur = 0;
      HG_CUDA_CHECK(cudaEventElapsedTime(&since_anchor, a.event, p.start));
      HG_CUDA_CHECK(cudaEventElapsedTime(&dur, p.start, p.end));
      spans_[static_cast<size_t>(p.number)] = {a.host_ns + std::llround(static_cast<double>(since_anchor) * 1e6),
                                               std::llround(static_cast<double>(dur) * 1e6), p.stream_index};
      release(it->second);
      it = slot_of_.erase(it);
    }
  }

  std::mutex mu_;
  bool active_ = false;
  Clock::time_point t0_;
  size_t capacity_ = 0;
  uint64_t ends_ = 0;
  std::vector<Pair> pool_;                     // every pair made, for the process's life
  std::vector<std::vector<size_t>> free_;      // per device: slots of pool_ free for reuse
  std::unordered_map<int64_t, size_t> slot_of_;  // recorded, unresolved pairs: number -> slot
  std::vector<DeviceSpan> spans_;              // by pair number
  std::vector<Anchor> anchors_;                // per device
  std::vector<std::vector<cudaStream_t>> streams_;  // per device, in first-use order
  DeviceTimingStats stats_;
};

}  // namespace

void note_device_work(Stream stream, const char* copy) {
  if (!profiler_hook::recording()) return;
  if (copy) profiler_hook::note_kernel(copy);
  profiler_hook::note_device_work(Device::cuda(stream.device()), stream.handle());
}

profiler_hook::DeviceTimer& profiler_event_timer() {
  static auto* timer = new EventTimer();  // never destroyed: ops may end during static destruction
  return *timer;
}

}  // namespace hg::cuda
