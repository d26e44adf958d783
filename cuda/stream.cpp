// Streams and events over the CUDA runtime (the real one or the emulation's).
#include "cuda/stream.h"

#include <array>
#include <mutex>
#include <vector>
#include <utility>

#include "cuda/cuda_api.h"
#include "cuda/runtime.h"
#include "framework/error.h"

namespace hg::cuda {

namespace {
constexpr int kMaxDevices = 16;
thread_local std::array<Stream, kMaxDevices> t_current{};
thread_local std::array<bool, kMaxDevices> t_current_set{};

void check_device(int device) {
  HG_CHECK(device >= 0 && device < device_count() && device < kMaxDevices, "cuda:", device,
           " does not exist: ", device_count(), " CUDA device(s) available");
}
}  // namespace

void Stream::synchronize() const {
  const DeviceGuard guard(device_);  // the default stream (nullptr) is the current device's
  HG_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
}

Stream default_stream(int device) {
  check_device(device);
  return Stream(nullptr, device);
}

Stream new_stream(int device) {
  check_device(device);
  cudaStream_t s = nullptr;
  {
    const DeviceGuard guard(device);
    HG_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  // Streams live until the process ends (Stream is a plain handle); kept here so that
  // they stay reachable, and leak checkers agree.
  static std::mutex mu;
  static auto* made = new std::vector<cudaStream_t>();
  std::lock_guard<std::mutex> lock(mu);
  made->push_back(s);
  return Stream(s, device);
}

Stream current_stream(int device) {
  check_device(device);
  return t_current_set[device] ? t_current[device] : Stream(nullptr, device);
}

StreamGuard::StreamGuard(Stream s) : previous_(current_stream(s.device())) {
  t_current[s.device()] = s;
  t_current_set[s.device()] = true;
}

StreamGuard::~StreamGuard() { t_current[previous_.device()] = previous_; }

// The CUDA event is made at the first record(), on the stream's device (an event can only
// be recorded on streams of the device it was created on); a record on another device
// replaces it with one made there.
Event::Event(bool timing) : timing_(timing) {}

Event::~Event() { release(); }

void Event::release() noexcept {
  if (!event_) return;
  if (cudaEventDestroy(static_cast<cudaEvent_t>(event_)) != cudaSuccess) cudaGetLastError();
  event_ = nullptr;
}

Event::Event(Event&& o) noexcept
    : event_(std::exchange(o.event_, nullptr)), device_(o.device_), timing_(o.timing_),
      recorded_(std::exchange(o.recorded_, false)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    release();
    event_ = std::exchange(o.event_, nullptr);
    device_ = o.device_;
    timing_ = o.timing_;
    recorded_ = std::exchange(o.recorded_, false);
  }
  return *this;
}

void Event::record(Stream s) {
  const DeviceGuard guard(s.device());
  if (event_ && device_ != s.device()) {
    release();
    recorded_ = false;
  }
  if (!event_) {
    cudaEvent_t e = nullptr;
    HG_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault : cudaEventDisableTiming));
    event_ = e;
    device_ = s.device();
  }
  HG_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(s.handle())));
  recorded_ = true;
}

void Event::synchronize() const {
  HG_CHECK(recorded_, "Event::synchronize: the event was never recorded; call record(stream) first");
  HG_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}

bool Event::done() const {
  if (!recorded_) return true;
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();  // not-ready is an answer, not a failure to report later
    return false;
  }
  HG_CUDA_CHECK(e);
  return true;
}

void Event::block(Stream s) const {
  HG_CHECK(recorded_, "Event::block: the event was never recorded; call record(stream) first");
  const DeviceGuard guard(s.device());
  HG_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.handle()), static_cast<cudaEvent_t>(event_), 0));
}

float Event::elapsed_ms(const Event& end) const {
  HG_CHECK(timing_ && end.timing_, "Event::elapsed_ms: both events must be made with timing = true");
  HG_CHECK(recorded_ && end.recorded_, "Event::elapsed_ms: both events must be recorded first");
  HG_CHECK(device_ == end.device_, "Event::elapsed_ms: the events were recorded on cuda:", device_, " and cuda:",
           end.device_, "; both must be on one device");
  end.synchronize();
  float ms = 0;
  HG_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(event_), static_cast<cudaEvent_t>(end.event_)));
  return ms;
}

}  // namespace hg::cuda
