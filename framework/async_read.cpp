// AsyncRead: CPU tensors are copied at once; device tensors through their backend's
// async_read_stub, taken into a CPU tensor the first time they are found done.
#include "framework/async_read.h"

#include <cstring>

namespace hg {

DispatchStub<std::unique_ptr<PendingRead>(const Tensor&)> async_read_stub("async_read");

AsyncRead::AsyncRead(const Tensor& t) : started_(true), shape_(t.shape()), dtype_(t.dtype()) {
  HG_CHECK(t.defined(), "AsyncRead: the tensor is undefined");
  if (t.device().is_cpu()) {
    host_ = t.contiguous().clone();
    return;
  }
  pending_ = async_read_stub(t.device(), t.contiguous());
}

bool AsyncRead::ready() {
  if (!started_) return false;
  if (host_.defined()) return true;
  if (!pending_->done()) return false;
  host_ = empty(shape_, {dtype_});
  std::memcpy(host_.data_ptr(), pending_->data(), static_cast<size_t>(host_.numel()) * dtype_size(dtype_));
  pending_.reset();
  return true;
}

Tensor AsyncRead::value() {
  HG_CHECK(ready(), "AsyncRead.value: the device has not produced the value yet (check ready() first)");
  return host_;
}

}  // namespace hg
