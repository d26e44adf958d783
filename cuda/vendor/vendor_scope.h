// What the cuBLAS and cuDNN wrappers share: the checks every call makes on its tensors, the
// device made current for the call, and the workspace taken from halfgrad's caching
// allocator on the current stream (so it shows in memory_stats and is reused, not malloced).
#pragma once
#include <cstddef>
#include <initializer_list>

#include "cuda/caching_allocator.h"
#include "cuda/cuda_api.h"
#include "cuda/stream.h"
#include "framework/error.h"
#include "framework/tensor.h"

namespace hg::cuda::vendor {

// Every tensor on the same cuda device and of the same dtype; returns that device's index.
inline int common_cuda_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor& first = **ts.begin();
  for (const Tensor* t : ts) {
    HG_CHECK(t->device().is_cuda(), op, ": the vendor references run on cuda devices, got a tensor on ",
             t->device().str());
    HG_CHECK(t->device() == first.device(), op, ": tensors on ", first.device().str(), " and ", t->device().str());
    HG_CHECK(t->dtype() == first.dtype(), op, ": operands of dtypes ", dtype_name(first.dtype()), " and ",
             dtype_name(t->dtype()), "; they must match");
  }
  return first.device().index;
}

// Makes `device` current for the calls in scope (the vendor libraries work on the current
// device) and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    HG_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) HG_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// Scratch memory for one vendor call on `stream`. Returned to the allocator when the call
// has been issued: a block freed on a stream is reused only by later work on that stream.
class Workspace {
 public:
  Workspace(int device, size_t bytes, Stream stream) : device_(device), bytes_(bytes) {
    if (bytes_) ptr_ = caching_allocator(device_).allocate(bytes_, stream);
  }
  ~Workspace() {
    if (ptr_) caching_allocator(device_).deallocate(ptr_, bytes_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  int device_;
  size_t bytes_;
  void* ptr_ = nullptr;
};

}  // namespace hg::cuda::vendor
