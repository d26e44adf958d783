// How often the host waited for an emulated device (cudaDeviceSynchronize,
// cudaStreamSynchronize, cudaEventSynchronize): tests use it to show that a code path, such as
// the profiler's CUDA-event timing, does not wait per op. Apart from runtime_api.h, which
// every kernel unit includes.
#pragma once
#include <cstdint>

namespace hg::cuda::emu {

// Waits since the process started, on every device and thread.
int64_t host_waits();

}  // namespace hg::cuda::emu
