// TMA (the Tensor Memory Accelerator, sm_90): a tile of a global tensor, described by a
// CUtensorMap made on the host, copied to shared memory by one thread; the copy completes
// on an mbarrier as a byte transaction (PTX ISA "Data Movement: cp.async.bulk.tensor").
// Out-of-bounds elements of the box are written as zeros, so tiles at matrix borders need
// no predicate. sm_90 natively; the emulation's model: cuda/emu/async_units.cpp, tma_model.h.
#pragma once
#include "cuda/primitives/common.h"
#include "cuda/primitives/mbarrier.h"

namespace hg::cuda {

// prefetch.tensormap: pulls the descriptor (a __grid_constant__ kernel parameter) into the
// cache ahead of the first copy that uses it.
HG_DEVICE void tma_prefetch_descriptor(const void* tensor_map) {
#if defined(HG_CUDA_EMULATION)
  (void)tensor_map;  // a cache hint: nothing to model
#else
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(tensor_map)) : "memory");
#endif
}

// cp.async.bulk.tensor.2d global -> shared: the box at element coordinates (c0 innermost,
// c1) into smem_dst (aligned as the map's swizzle requires: 1024 bytes for 128B swizzle),
// completing its bytes on `bar`.
HG_DEVICE void tma_load_2d(void* smem_dst, const void* tensor_map, uint64_t* bar, int32_t c0, int32_t c1) {
#if defined(HG_CUDA_EMULATION)
  const int32_t c[2] = {c0, c1};
  emu::tma_load(smem_dst, tensor_map, bar, c, 2);
#else
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_address(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(smem_address(bar)), "r"(c0), "r"(c1)
      : "memory");
#endif
}

// The same for a 3-D map (c2 outermost: the batch index of a batched matrix).
HG_DEVICE void tma_load_3d(void* smem_dst, const void* tensor_map, uint64_t* bar, int32_t c0, int32_t c1,
                           int32_t c2) {
#if defined(HG_CUDA_EMULATION)
  const int32_t c[3] = {c0, c1, c2};
  emu::tma_load(smem_dst, tensor_map, bar, c, 3);
#else
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::
          "r"(smem_address(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}

// cp.async.bulk.tensor.3d global <- shared::cta (a store): the box at (c0, c1, c2) from
// smem_src (laid out, and swizzled, as a load of the same map would write it); out-of-bounds
// elements are not written. It joins the thread's bulk group: tma_store_commit() closes the
// group, tma_store_wait_read<N>() waits until at most N groups still read shared memory.
// Shared-memory writes of other threads must reach the async proxy first: a
// fence_proxy_async_shared() by each writer, then a barrier, then the store.
HG_DEVICE void tma_store_3d(const void* tensor_map, const void* smem_src, int32_t c0, int32_t c1, int32_t c2) {
#if defined(HG_CUDA_EMULATION)
  const int32_t c[3] = {c0, c1, c2};
  emu::tma_store(tensor_map, smem_src, c, 3);
#else
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(tensor_map)),
               "r"(smem_address(smem_src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
#endif
}

HG_DEVICE void tma_store_commit() {
#if defined(HG_CUDA_EMULATION)
  emu::bulk_commit();
#else
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

template <int N>
HG_DEVICE void tma_store_wait_read() {
  static_assert(N >= 0 && N <= 7, "cp.async.bulk.wait_group.read takes 0..7 here");
#if defined(HG_CUDA_EMULATION)
  emu::bulk_wait_read(N);
#else
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
#endif
}

// fence.proxy.async.shared::cta: orders this thread's generic-proxy accesses to shared
// memory with later async-proxy ones (TMA, wgmma operand reads), e.g. after mbarrier init.
HG_DEVICE void fence_proxy_async_shared() {
#if !defined(HG_CUDA_EMULATION)  // one address space in the emulation
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

}  // namespace hg::cuda
