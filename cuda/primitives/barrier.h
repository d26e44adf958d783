// Barriers and fences: bar.sync 0 (__syncthreads), bar.warp.sync (__syncwarp), and
// membar.gl (__threadfence). Named barriers with thread counts are not provided.
#pragma once
#include <atomic>

#include "cuda/primitives/common.h"

namespace hg::cuda {

// Every thread of the block waits here until all (that have not exited) arrive.
HG_DEVICE void sync_threads() { __syncthreads(); }

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
