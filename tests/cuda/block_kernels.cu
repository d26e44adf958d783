// Kernels about blocks: a shared-memory reduction with and without its barrier, dynamic
// shared memory over a 2-D grid of 2-D blocks, deliberate out-of-bounds writes, and a
// trivial kernel for the launcher's checks.
#include "cuda/launch.h"
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/shared_memory.h"
#include "framework/tensor.h"
#include "tests/cuda/device_buffer.h"
#include "tests/cuda/test_kernels.h"

namespace hg::test::kernels {

using cuda::launch;

namespace {

// The classic tree reduction. Without the barrier after the stores (Racy), a thread may
// read a neighbour's slot before the neighbour has written it.
template <bool Racy>
__global__ void block_sum_kernel(const int32_t* values, int32_t* sums) {
  __shared__ int32_t partial[1024];
  const unsigned t = threadIdx.x;
  partial[t] = values[blockIdx.x * blockDim.x + t];
  if constexpr (!Racy) cuda::sync_threads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s) partial[t] += partial[t + s];
    cuda::sync_threads();
  }
  if (t == 0) sums[blockIdx.x] = partial[0];
}

__global__ void reverse_kernel(const float* in, float* out) {
  float* buf = cuda::dynamic_shared_memory<float>();
  const unsigned per_block = blockDim.x * blockDim.y;
  const unsigned local = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
  buf[local] = in[block * per_block + local];
  cuda::sync_threads();
  out[block * per_block + local] = buf[per_block - 1 - local];
}

__global__ void past_end_kernel(float* p, size_t n, bool into_shared) {
  if (threadIdx.x != 0) return;
  if (into_shared) cuda::dynamic_shared_memory<float>()[n] = 1.0f;
  else p[n] = 1.0f;
}

__global__ void empty_kernel() {}

}  // namespace

std::vector<int32_t> block_sums(const std::vector<int32_t>& values, unsigned threads, bool racy) {
  const auto blocks = static_cast<unsigned>(values.size() / threads);
  DeviceBuffer<int32_t> dv(values), sums(blocks);
  const cuda::LaunchConfig cfg{.grid = blocks, .block = threads, .name = "block_sum_kernel"};
  if (racy) launch(block_sum_kernel<true>, cfg, dv.get(), sums.get());
  else launch(block_sum_kernel<false>, cfg, dv.get(), sums.get());
  return sums.read();
}

std::vector<float> reverse_blocks(const std::vector<float>& values, unsigned bx, unsigned by, unsigned tx, unsigned ty) {
  DeviceBuffer<float> in(values), out(values.size());
  launch(reverse_kernel, {.grid = {bx, by}, .block = {tx, ty}, .shared_bytes = tx * ty * sizeof(float), .name = "reverse_kernel"},
         in.get(), out.get());
  return out.read();
}

void write_past_end(size_t n, bool into_shared) {
  // A tensor's storage comes from the caching allocator, which rounds sizes up: the bytes
  // past the request are poisoned, so even a write inside the rounded block is caught.
  Tensor t = empty({static_cast<int64_t>(n)}, {DType::f32, Device::cuda(0)});
  launch(past_end_kernel, {.grid = 1, .block = 32, .shared_bytes = into_shared ? n * sizeof(float) : 0, .name = "past_end_kernel"},
         static_cast<float*>(t.data_ptr()), n, into_shared);
}

void launch_empty(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t smem) {
  launch(empty_kernel, {.grid = {gx, gy, gz}, .block = {bx, by, bz}, .shared_bytes = smem, .name = "empty_kernel"});
}

}  // namespace hg::test::kernels
