// What a kernel .cu file sees when the host compiler builds it for the CUDA emulation
// (-Dcuda-emulation=true): the CUDA keywords and built-ins, mapped onto cuda/emu/executor.h.
// Kernel sources do not include this; the build prepends it to every .cu it compiles.
//
// Rules for kernel code that runs both natively and here:
// - launch with hg::cuda::launch (cuda/launch.h), never <<< >>>;
// - warp-level and tensor-core instructions only through cuda/primitives/;
// - `__shared__ T x[N];` inside a kernel or device function is one array per block
//   (here: static thread_local, one block per host thread at a time); it is uninitialised;
// - dynamic shared memory through hg::cuda::dynamic_shared_memory<T>() (primitives/
//   shared_memory.h) rather than `extern __shared__`, which has no host equivalent;
// - kernel locals must be trivially destructible (a failing block abandons its fibers).
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/emu/executor.h"
#include "cuda/emu/runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static thread_local
#define __constant__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __grid_constant__

inline void __syncthreads() { hg::cuda::emu::block_barrier(); }
