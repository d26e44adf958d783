// copy on the cuda device: between any two dtypes (IEEE rounding as on the CPU), from
// strided and broadcast sources into strided destinations; same-dtype contiguous copies
// are a device-to-device memcpy.
#include "cuda/elementwise_loops.h"
#include "cuda/profiler_events.h"
#include "ops/copy_kernels.h"

namespace hg::cuda {
namespace {

template <class D, class S>
struct Convert {
  HG_DEVICE D operator()(S v) const { return dev_convert<D>(v); }
};

void copy_cuda(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    const DeviceGuard guard(dst.device().index);  // the legacy stream of dst's device
    const Stream stream = current_stream(dst.device().index);
    note_device_work(stream, "memcpy DtoD");
    HG_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype()),
                                  cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream.handle())));
    return;
  }
  visit_dtype(dst.dtype(), [&]<typename D>() {
    visit_dtype(src.dtype(), [&]<typename S>() { map<D, S>("copy", dst, {&src}, Convert<D, S>{}); });
  });
}

}  // namespace

HG_REGISTER_KERNEL(copy_stub, cuda, copy_cuda);

}  // namespace hg::cuda
