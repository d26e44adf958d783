// Small device values brought to the host without waiting: the copy is queued behind the
// work that computes them, and the host looks only once the device has got there. For
// checks that must not add a host synchronisation to a training step (the loss scaler's
// watch on consecutive skipped steps).
#pragma once
#include <memory>

#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// A device-to-host copy in flight: done() never waits; data() is valid once done().
class PendingRead {
 public:
  virtual ~PendingRead() = default;
  virtual bool done() = 0;
  virtual const void* data() const = 0;
};

// A backend queues a copy of the contiguous tensor's bytes, in stream order, into host
// memory it owns (page-locked on CUDA, so the copy does not block the host).
extern DispatchStub<std::unique_ptr<PendingRead>(const Tensor& src)> async_read_stub;

class AsyncRead {
 public:
  AsyncRead() = default;
  // Starts reading `t` (any device; a CPU tensor is copied at once).
  explicit AsyncRead(const Tensor& t);
  bool started() const { return started_; }
  // True once the value can be taken without waiting; never waits itself.
  bool ready();
  // The value as a CPU tensor of t's shape and dtype; hg::Error unless ready().
  Tensor value();

 private:
  bool started_ = false;
  Tensor host_;  // the CPU copy, once known
  Shape shape_;
  DType dtype_ = f32;
  std::unique_ptr<PendingRead> pending_;
};

}  // namespace hg
