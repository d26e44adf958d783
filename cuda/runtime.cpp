// CUDA device discovery, the device allocator and host<->device transfers. The
// caching allocator and the rest of the backend build on these.
#include "cuda/runtime.h"

#include <cuda_runtime.h>

#include <mutex>

#include "framework/allocator.h"
#include "framework/error.h"
#include "ops/copy_kernels.h"

namespace hg {
extern bool (*g_cuda_available)();
}

namespace hg::cuda {

namespace {
struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static Probe p = [] {
    Probe r;
    cudaError_t e = cudaGetDeviceCount(&r.count);
    if (e != cudaSuccess) {
      r.count = 0;
      r.reason = cudaGetErrorString(e);
      cudaGetLastError();  // clear the sticky error so later calls report their own
    } else if (r.count == 0) {
      r.reason = "no CUDA device found";
    }
    return r;
  }();
  return p;
}

class DeviceAllocator : public Allocator {
 public:
  explicit DeviceAllocator(int index) : index_(index) {}
  void* allocate(size_t n) override {
    if (n == 0) return nullptr;
    HG_CUDA_CHECK(cudaSetDevice(index_));
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess)
      throw Error(detail::concat("cuda:", index_, ": could not allocate ", n, " bytes: ", cudaGetErrorString(e)));
    return p;
  }
  void deallocate(void* p, size_t) override { cudaFree(p); }

 private:
  int index_;
};

Allocator* allocator(int index) {
  const Probe& p = probe();
  HG_CHECK(p.count > 0, "cuda:", index, " is not available: ", p.reason, " (use the cpu device, or Device::automatic())");
  HG_CHECK(index >= 0 && index < p.count, "cuda:", index, " does not exist: ", p.count, " CUDA device(s) found");
  static std::mutex mu;
  static std::vector<std::unique_ptr<DeviceAllocator>> per_device;
  std::lock_guard<std::mutex> lock(mu);
  if (per_device.empty())
    for (int i = 0; i < p.count; ++i) per_device.push_back(std::make_unique<DeviceAllocator>(i));
  return per_device[static_cast<size_t>(index)].get();
}

// Both tensors contiguous, same dtype and size; one side on the CPU.
void transfer(const Tensor& dst, const Tensor& src) {
  const size_t n = static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype());
  cudaMemcpyKind kind = dst.device().is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  HG_CUDA_CHECK(cudaMemcpy(dst.data_ptr(), src.data_ptr(), n, kind));
}

const bool registered = [] {
  register_allocator(DeviceKind::cuda, &allocator);
  transfer_stub.set(DeviceKind::cuda, &transfer);
  g_cuda_available = [] { return probe().count > 0; };
  return true;
}();
}  // namespace

int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

void check(int err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  throw Error(detail::concat(what, ": ", cudaGetErrorString(static_cast<cudaError_t>(err)), " (", file, ":", line, ")"));
}

}  // namespace hg::cuda
