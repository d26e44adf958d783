// A device array for test kernels: filled from a host vector, read back into one. Include
// from .cu files only (it uses the CUDA runtime API).
#pragma once
#include <vector>

#include "cuda/cuda_api.h"
#include "cuda/runtime.h"

namespace hg::test {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { HG_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T))); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    HG_CUDA_CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  std::vector<T> read() const {
    std::vector<T> host(n_);
    HG_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

}  // namespace hg::test
