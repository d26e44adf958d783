// Random fills on the cuda device: element i is Philox block i of the key, computed by the
// same philox4x32 as the CPU (framework/generator.h) and turned into a value by the same
// function (philox_value, ops/random_kernels.h), so a seeded draw gives the same tensor on
// every device.
#include "cuda/elementwise_loops.h"
#include "ops/random_kernels.h"

namespace hg::cuda {
namespace {

template <class T>
__global__ void random_fill(T* out, int64_t n, Distribution d, PhiloxKey key, double p0, double p1) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const std::array<uint32_t, 4> w = philox4x32(key, static_cast<uint64_t>(i));
    out[i] = dev_store<T>(philox_value(d, w, sizeof(T) == 8, p0, p1));
  }
}

void random_cuda(Distribution d, const Tensor& out, PhiloxKey key, double p0, double p1) {
  HG_CHECK(out.is_contiguous(), "random: the output must be contiguous");
  const int64_t n = out.numel();
  if (n == 0) return;
  visit_dtype(out.dtype(), [&]<typename T>() {
    launch(random_fill<T>,
           {.grid = map_blocks(n), .block = kMapThreads, .stream = current_stream(out.device().index),
            .name = "random_fill"},
           out.data<T>(), n, d, key, p0, p1);
  });
}

}  // namespace

HG_REGISTER_KERNEL(random_stub, cuda, random_cuda);

}  // namespace hg::cuda
