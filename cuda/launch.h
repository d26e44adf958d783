// The one way kernels are launched:
//   hg::cuda::launch(my_kernel, {.grid = blocks, .block = 256, .shared_bytes = smem}, args...);
// The configuration is checked against the device (hg::Error naming the kernel and what is
// valid); the stream's device is made current for the launch (DeviceGuard), so the kernel
// runs where its stream and tensors are; natively the kernel is launched on the stream with
// <<< >>> and the launch error checked; under the emulation it runs on the CPU and returns
// when done. Include from .cu
// files only (natively this header needs nvcc).
#pragma once
#include <cstddef>
#include <tuple>
#include <utility>

#include "cuda/cuda_api.h"
#include "cuda/launch_config.h"
#include "cuda/runtime.h"

#if defined(HG_CUDA_EMULATION)
#include "cuda/emu/executor.h"
#elif !defined(__CUDACC__)
#error "cuda/launch.h launches kernels: include it from .cu files (compiled by nvcc or for the emulation)"
#endif

namespace hg::cuda {

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), const LaunchConfig& cfg, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "hg::cuda::launch: argument count differs from the kernel's");
  check_launch(cfg);
  const DeviceGuard on_device(cfg.stream.device());
#if defined(HG_CUDA_EMULATION)
  // Each CUDA thread calls the kernel with its own copy of the parameters, as each GPU
  // thread reads them from the parameter space.
  struct Call {
    void (*kernel)(Params...);
    std::tuple<Params...> params;
  };
  const Call call{kernel, std::tuple<Params...>(static_cast<Params>(std::forward<Args>(args))...)};
  HG_CUDA_CHECK(emu::begin_launch(static_cast<cudaStream_t>(cfg.stream.handle())));
  emu::run_grid(cfg.grid, cfg.block, cfg.shared_bytes,
                {[](const void* ctx) {
                   const Call& c = *static_cast<const Call*>(ctx);
                   std::apply(c.kernel, c.params);
                 },
                 &call, reinterpret_cast<const void*>(kernel), cfg.name});
#else
  // The opt-in is per kernel and device, and a driver call: made when a launch needs more
  // than the kernel was last given there, not on every launch.
  const void* id = reinterpret_cast<const void*>(kernel);
  if (cfg.shared_bytes > 48 * 1024 && cfg.shared_bytes > shared_limit_raised(id, cfg.stream.device())) {
    HG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(cfg.shared_bytes)));
    mark_shared_limit_raised(id, cfg.stream.device(), cfg.shared_bytes);
  }
  kernel<<<cfg.grid, cfg.block, cfg.shared_bytes, static_cast<cudaStream_t>(cfg.stream.handle())>>>(
      static_cast<Params>(std::forward<Args>(args))...);
  HG_CUDA_CHECK(cudaGetLastError());
#endif
}

}  // namespace hg::cuda
