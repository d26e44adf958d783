// CUDA streams and events as halfgrad uses them: a default stream per device, a
// thread-local current stream (set with StreamGuard) that launches and allocations use,
// and events for ordering streams and timing work. Header free of CUDA includes.
#pragma once
#include <cstdint>

namespace hg::cuda {

// A non-owning handle: streams made by new_stream() live until the process ends, so a
// Stream value never dangles. The default-constructed Stream is device 0's default stream.
class Stream {
 public:
  Stream() = default;
  Stream(void* handle, int device) : handle_(handle), device_(device) {}
  void* handle() const { return handle_; }  // a cudaStream_t; nullptr for the default stream
  int device() const { return device_; }
  bool is_default() const { return handle_ == nullptr; }
  void synchronize() const;  // waits for the work issued on the stream
  bool operator==(const Stream&) const = default;

 private:
  void* handle_ = nullptr;
  int device_ = 0;
};

Stream default_stream(int device = 0);
// A new stream on `device` that does not synchronise with the default stream.
Stream new_stream(int device = 0);
// The stream this host thread issues work to on `device` (the default stream unless a
// StreamGuard says otherwise).
Stream current_stream(int device = 0);

// Makes `s` the current stream of its device for this thread, for the guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(Stream s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// A point in a stream's work, on the device of the stream it was last recorded on.
// record() marks it; synchronize() waits for it on the host;
// Stream work issued after wait_on() runs after it; elapsed_ms() times two recorded events.
class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(Stream s);
  void record() { record(current_stream()); }
  void synchronize() const;
  bool done() const;                    // the recorded work has finished
  void block(Stream s) const;           // work issued to s from now on waits for this event
  float elapsed_ms(const Event& end) const;  // both recorded, both made with timing = true
  bool recorded() const { return recorded_; }

 private:
  void release() noexcept;
  void* event_ = nullptr;  // a cudaEvent_t, made by the first record()
  int device_ = -1;
  bool timing_ = true, recorded_ = false;
};

}  // namespace hg::cuda
