// The CUDA backend of hg::AsyncRead (framework/async_read.h): a copy into page-locked host
// memory on the tensor's current stream, then an event the host polls. Buffers are reused
// from a small pool, since page-locking memory is slow and can synchronise.
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda/cuda_api.h"
#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "framework/async_read.h"

namespace hg::cuda {
namespace {

// Page-locked buffers by size class (powers of two from 256 bytes), kept for reuse.
class PinnedPool {
 public:
  static size_t size_class(size_t bytes) {
    size_t c = 256;
    while (c < bytes) c *= 2;
    return c;
  }
  void* take(size_t cls) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& list = free_[cls];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        return p;
      }
    }
    void* p = nullptr;
    HG_CUDA_CHECK(cudaMallocHost(&p, cls));
    return p;
  }
  void give_back(size_t cls, void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    free_[cls].push_back(p);
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
};

PinnedPool& pool() {
  static PinnedPool* p = new PinnedPool;  // never destroyed: reads may end after static destruction starts
  return *p;
}

class CudaPendingRead final : public PendingRead {
 public:
  explicit CudaPendingRead(const Tensor& src)
      : bytes_(static_cast<size_t>(src.numel()) * dtype_size(src.dtype())), cls_(PinnedPool::size_class(bytes_)) {
    const int device = src.device().index;
    const DeviceGuard guard(device);
    buffer_ = pool().take(cls_);
    Stream stream = current_stream(device);
    try {
      if (bytes_ > 0)
        HG_CUDA_CHECK(cudaMemcpyAsync(buffer_, src.data_ptr(), bytes_, cudaMemcpyDeviceToHost,
                                      static_cast<cudaStream_t>(stream.handle())));
      copied_.record(stream);
    } catch (...) {
      pool().give_back(cls_, buffer_);
      throw;
    }
  }
  ~CudaPendingRead() override {
    // The copy may still be writing the buffer: it returns to the pool only once done.
    try {
      if (!copied_.done()) copied_.synchronize();
    } catch (...) {
      return;  // a failed device: the buffer is leaked rather than reused while written
    }
    pool().give_back(cls_, buffer_);
  }
  bool done() override { return copied_.done(); }
  const void* data() const override { return buffer_; }

 private:
  size_t bytes_, cls_;
  void* buffer_ = nullptr;
  Event copied_{false};
};

std::unique_ptr<PendingRead> async_read_cuda(const Tensor& src) { return std::make_unique<CudaPendingRead>(src); }

}  // namespace

HG_REGISTER_KERNEL(async_read_stub, cuda, async_read_cuda);

}  // namespace hg::cuda
