// Kernels for the emulation's memory checks (tests/cuda/test_racecheck.cpp): each comes in
// a correct form and one with the bug the checks exist for; the host side is plain.
#include "tests/cuda/race_kernels.h"

#include "cuda/launch.h"
#include "cuda/primitives/atomics.h"
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/cp_async.h"
#include "tests/cuda/device_buffer.h"

namespace hg::test::kernels {

using cuda::launch;

namespace {

template <bool Atomic>
__global__ void shared_count_kernel(uint32_t* out) {
  __shared__ uint32_t slot;
  if (threadIdx.x == 0) slot = 0;
  cuda::sync_threads();
  if constexpr (Atomic) cuda::atomic_add(&slot, 1u);
  else slot += 1;
  cuda::sync_threads();
  if (threadIdx.x == 0) out[blockIdx.x] = slot;
}

template <bool Atomic>
__global__ void global_count_kernel(uint32_t* count) {
  if (threadIdx.x != 0) return;
  if constexpr (Atomic) cuda::atomic_add(count, 1u);
  else *count += 1;
}

__global__ void static_shared_kernel(uint32_t* out, bool write_first) {
  __shared__ uint32_t scratch[64];
  if (write_first) scratch[threadIdx.x] = threadIdx.x + 1;
  cuda::sync_threads();
  out[threadIdx.x] = scratch[threadIdx.x];
}

__global__ void warp_exchange_kernel(uint32_t* out) {
  __shared__ uint32_t s[32];
  s[threadIdx.x] = threadIdx.x * 3;
  cuda::sync_warp();
  out[threadIdx.x] = s[threadIdx.x ^ 1];
}

__global__ void cp_async_read_kernel(const uint32_t* src, uint32_t* out, bool before_wait) {
  __shared__ __align__(16) uint32_t buf[32 * 4];
  cuda::cp_async<16>(&buf[threadIdx.x * 4], &src[threadIdx.x * 4]);
  cuda::cp_async_commit();
  if (!before_wait) cuda::cp_async_wait<0>();
  out[threadIdx.x] = buf[threadIdx.x * 4];
  cuda::cp_async_wait<0>();
}

__global__ void overwrite_kernel(uint32_t* out, bool barrier) {
  __shared__ uint32_t word;
  if (threadIdx.x == 0) word = 7;
  cuda::sync_threads();
  const uint32_t seen = word;
  if (barrier) cuda::sync_threads();
  if (threadIdx.x == 32) word = 9;
  out[threadIdx.x] = seen;
}

}  // namespace

std::vector<uint32_t> shared_count(unsigned blocks, unsigned threads, bool atomic) {
  DeviceBuffer<uint32_t> out(blocks);
  const cuda::LaunchConfig cfg{.grid = blocks, .block = threads, .name = "shared_count_kernel"};
  if (atomic) launch(shared_count_kernel<true>, cfg, out.get());
  else launch(shared_count_kernel<false>, cfg, out.get());
  return out.read();
}

uint32_t global_count(unsigned blocks, bool atomic) {
  DeviceBuffer<uint32_t> count(std::vector<uint32_t>{0});
  const cuda::LaunchConfig cfg{.grid = blocks, .block = 32, .name = "global_count_kernel"};
  if (atomic) launch(global_count_kernel<true>, cfg, count.get());
  else launch(global_count_kernel<false>, cfg, count.get());
  return count.read()[0];
}

std::vector<uint32_t> read_static_shared(bool write_first) {
  DeviceBuffer<uint32_t> out(64);
  launch(static_shared_kernel, {.grid = 1, .block = 64, .name = "static_shared_kernel"}, out.get(), write_first);
  return out.read();
}

std::vector<uint32_t> warp_exchange() {
  DeviceBuffer<uint32_t> out(32);
  launch(warp_exchange_kernel, {.grid = 1, .block = 32, .name = "warp_exchange_kernel"}, out.get());
  return out.read();
}

std::vector<uint32_t> cp_async_then_read(const std::vector<uint32_t>& src, bool before_wait) {
  DeviceBuffer<uint32_t> in(src), out(32);
  launch(cp_async_read_kernel, {.grid = 1, .block = 32, .name = "cp_async_read_kernel"}, in.get(), out.get(),
         before_wait);
  return out.read();
}

std::vector<uint32_t> read_then_overwrite(bool barrier) {
  DeviceBuffer<uint32_t> out(64);
  launch(overwrite_kernel, {.grid = 1, .block = 64, .name = "overwrite_kernel"}, out.get(), barrier);
  return out.read();
}

}  // namespace hg::test::kernels
