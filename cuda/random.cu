// Random fills on the cuda device: element i is Philox block i of the key, computed by the
// same philox4x32 as the CPU (framework/generator.h) and turned into a value by the same
// f64 arithmetic, so a seeded draw gives the same tensor on every device.
#include "cuda/device_math.h"
#include "cuda/elementwise_loops.h"
#include "ops/random_kernels.h"

namespace hg::cuda {
namespace {

template <class T>
__global__ void random_fill(T* out, int64_t n, Distribution d, PhiloxKey key, double p0, double p1) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const std::array<uint32_t, 4> w = philox4x32(key, static_cast<uint64_t>(i));
    double v = 0;
    switch (d) {
      case Distribution::uniform:
        v = p0 + (p1 - p0) * (sizeof(T) == 8 ? uniform_f64(w[0], w[1]) : double(uniform_f32(w[0])));
        break;
      case Distribution::normal: {
        const double u = 1.0 - uniform_f64(w[0], w[1]), t = uniform_f64(w[2], w[3]);
        v = p0 + p1 * math_sqrt(-2.0 * math_log(u)) * math_cos(6.283185307179586 * t);
        break;
      }
      case Distribution::integer: {
        const uint64_t range = static_cast<uint64_t>(p1 - p0), r = (uint64_t{w[0]} << 32) | w[1];
        v = p0 + static_cast<double>(r % range);
        break;
      }
      case Distribution::bernoulli: v = uniform_f64(w[0], w[1]) < p0 ? 1.0 : 0.0; break;
    }
    out[i] = dev_store<T>(v);
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
