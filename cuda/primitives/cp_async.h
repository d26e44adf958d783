// cp.async: asynchronous copies from global to shared memory (sm_80). cp_async<N> queues
// an N-byte copy (4, 8 or 16; both addresses N-byte aligned) of which the first src_bytes
// come from src and the rest are zero-filled (src_bytes = 0 predicates a load off at a tile
// border without a branch). Copies join the thread's open group; commit closes it;
// cp_async_wait<N>() waits until at most N committed groups are still in flight. The data
// may be read only after the wait (and, by other threads, after a barrier): the emulation
// performs each copy at its wait, so reading earlier reads stale shared memory.
#pragma once
#include "cuda/primitives/common.h"

namespace hg::cuda {

template <int Bytes>
HG_DEVICE void cp_async(void* smem_dst, const void* gmem_src, uint32_t src_bytes = Bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(HG_CUDA_EMULATION)
  emu::cp_async(smem_dst, gmem_src, Bytes, src_bytes);
#else
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
  if constexpr (Bytes == 16)  // .cg (bypass L1) exists only for 16 bytes
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem_src), "r"(src_bytes) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(gmem_src), "n"(Bytes), "r"(src_bytes)
                 : "memory");
#endif
}

// cp.async.commit_group
HG_DEVICE void cp_async_commit() {
#if defined(HG_CUDA_EMULATION)
  emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// cp.async.wait_group N
template <int N>
HG_DEVICE void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a count >= 0");
#if defined(HG_CUDA_EMULATION)
  emu::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

}  // namespace hg::cuda
