// CUDA device discovery, the registration of the caching allocator as the cuda device's
// allocator and of the profiler's event timer, and host<->device transfers.
#include "cuda/runtime.h"

#include <cstdio>

#include "cuda/caching_allocator.h"
#include "cuda/cuda_api.h"
#include "cuda/profiler_events.h"
#include "framework/allocator.h"
#include "framework/error.h"
#include "framework/profiler_device.h"
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

Allocator* allocator(int index) {
  const Probe& p = probe();
  HG_CHECK(p.count > 0, "cuda:", index, " is not available: ", p.reason, " (use the cpu device, or Device::automatic())");
  HG_CHECK(index >= 0 && index < p.count, "cuda:", index, " does not exist: ", p.count, " CUDA device(s) found");
  return &caching_allocator(index);
}

// Same dtype and shape; one side on the CPU. On the device's current stream, then waited
// for: the host buffer may be freed as soon as this returns. A non-contiguous side goes
// through a contiguous staging copy on its own device.
void transfer(const Tensor& dst, const Tensor& src) {
  HG_CHECK(dst.dtype() == src.dtype() && dst.shape() == src.shape(), "transfer: ", dtype_name(src.dtype()),
           shape_str(src.shape()), " to ", dtype_name(dst.dtype()), shape_str(dst.shape()), ": dtype and shape must match");
  if (!src.is_contiguous()) return transfer(dst, src.detach().contiguous());
  if (!dst.is_contiguous()) {
    const Tensor staged = empty(dst.shape(), {dst.dtype(), dst.device()});
    transfer(staged, src);
    copy_stub(dst.device(), dst, staged);
    return;
  }
  const size_t n = static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype());
  const Device d = dst.device().is_cpu() ? src.device() : dst.device();
  const cudaMemcpyKind kind = dst.device().is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  const Stream s = current_stream(d.index);
  const DeviceGuard guard(d.index);
  note_device_work(s, kind == cudaMemcpyHostToDevice ? "memcpy HtoD" : "memcpy DtoH");
  HG_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), n, kind, static_cast<cudaStream_t>(s.handle())));
  s.synchronize();
}

const bool registered = [] {
  register_allocator(DeviceKind::cuda, &allocator);
  transfer_stub.set(DeviceKind::cuda, &transfer);
  profiler_hook::register_device_timer(&profiler_event_timer());
  profiler_hook::register_allocator_bytes([](int device) {
    const CachingAllocatorStats s = caching_allocator(device).stats();
    return profiler_hook::AllocatorBytes{s.in_use, s.reserved};
  });
  // Device::automatic() means "a GPU if there is one": the emulation is for tests, so it
  // is used only where cuda:0 is asked for.
  g_cuda_available = [] { return !is_emulated() && probe().count > 0; };
  return true;
}();
}  // namespace

int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

bool is_emulated() {
#ifdef HG_CUDA_EMULATION
  return true;
#else
  return false;
#endif
}

std::string device_name(int device) {
  HG_CHECK(device >= 0 && device < device_count(), "cuda:", device, " does not exist: ", device_count(),
           " CUDA device(s) available", device_count() == 0 ? " (" + unavailable_reason() + ")" : std::string());
  cudaDeviceProp p;
  HG_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return is_emulated() ? std::string(p.name) + " (emulated on the CPU)" : std::string(p.name);
}

DeviceGuard::DeviceGuard(int device) {
  HG_CHECK(device >= 0 && device < device_count(), "cuda:", device, " does not exist: ", device_count(),
           " CUDA device(s) available");
  int current = 0;
  HG_CUDA_CHECK(cudaGetDevice(&current));
  if (current == device) return;
  HG_CUDA_CHECK(cudaSetDevice(device));
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ < 0) return;
  if (const cudaError_t e = cudaSetDevice(previous_); e != cudaSuccess) {
    cudaGetLastError();
    std::fprintf(stderr, "halfgrad: could not make cuda:%d current again: %s\n", previous_, cudaGetErrorString(e));
  }
}

void check(int err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // reported here; the next launch check must not see it again
  throw Error(detail::concat(what, ": ", cudaGetErrorString(static_cast<cudaError_t>(err)), " (", file, ":", line, ")"));
}

}  // namespace hg::cuda
