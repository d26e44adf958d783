// Barriers and fences: bar.sync 0 (__syncthreads), named barriers (bar.sync id, count),
// bar.warp.sync (__syncwarp), and membar.gl (__threadfence).
#pragma once
#include <atomic>

#include "cuda/primitives/common.h"

namespace hg::cuda {

// Every thread of the block waits here until all (that have not exited) arrive.
HG_DEVICE void sync_threads() { __syncthreads(); }

// bar.sync id, count: the calling warps wait until `count` threads (a multiple of 32) have
// arrived at barrier `id` (1..15; 0 is sync_threads'), e.g. the 128 threads of one warpgroup
// while the block's other warpgroups go on.
HG_DEVICE void named_barrier_sync(unsigned id, unsigned count) {
#if defined(HG_CUDA_EMULATION)
  emu::named_barrier_sync(id, count);
#else
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
#endif
}

// The member lanes of the warp wait for each other (and their memory accesses are ordered).
HG_DEVICE void sync_warp(uint32_t mask = 0xffffffffu) {
#if defined(HG_CUDA_EMULATION)
  emu::bar_warp_sync(mask);
#else
  asm volatile("bar.warp.sync %0;" ::"r"(mask) : "memory");
#endif
}

// Orders this thread's memory accesses device-wide (before a flag another block polls).
HG_DEVICE void thread_fence() {
#if defined(HG_CUDA_EMULATION)
  std::atomic_thread_fence(std::memory_order_seq_cst);
#else
  asm volatile("membar.gl;" ::: "memory");
#endif
}

}  // namespace hg::cuda
