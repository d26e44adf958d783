// A kernel launch's configuration and its check against the device, apart from
// cuda/launch.h so that plain .cpp files (and their tests) can build and check one.
#pragma once
#include <cstddef>

#include "cuda/cuda_api.h"
#include "cuda/stream.h"

namespace hg::cuda {

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;           // dynamic shared memory per block
  Stream stream = current_stream();  // evaluated where the config is written
  const char* name = nullptr;        // the kernel's name, for error messages
};

// Throws hg::Error when the configuration cannot launch on the stream's device: block
// dimensions (x, y <= 1024, z <= 64, 1..1024 threads in all), grid dimensions (x < 2^31,
// y, z <= 65535, none zero), dynamic shared memory above the device's opt-in limit.
void check_launch(const LaunchConfig& cfg);

// The dynamic shared memory limit launch() last set for kernel on device with
// cudaFuncSetAttribute (0: none), and recording a new one.
size_t shared_limit_raised(const void* kernel, int device);
void mark_shared_limit_raised(const void* kernel, int device, size_t bytes);

}  // namespace hg::cuda
