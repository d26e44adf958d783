// mbarrier: the shared-memory transaction barrier of sm_90 that TMA copies complete on and
// that producer and consumer warps hand pipeline stages over with (PTX ISA "Parallel
// Synchronization and Communication Instructions: mbarrier"). sm_90 natively; the emulation's
// model is in cuda/emu/async_units.cpp.
#pragma once
#include "cuda/primitives/common.h"

namespace hg::cuda {

// A barrier is 8 bytes of shared memory, 8-byte aligned; the instructions take its
// shared-window address.
HG_DEVICE uint32_t smem_address(const void* p) {
#if defined(HG_CUDA_EMULATION)
  return emu::shared_window_address(p);
#else
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#endif
}

// mbarrier.init: the current phase (parity 0) completes after `count` arrivals and, once
// expect_tx has raised it, after that many bytes of transactions.
HG_DEVICE void mbarrier_init(uint64_t* bar, uint32_t count) {
#if defined(HG_CUDA_EMULATION)
  emu::mbarrier_init(bar, count);
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count) : "memory");
#endif
}

// fence.mbarrier_init: makes the inits visible (to the async proxy that TMA writes through,
// and to other threads) before anyone arrives; follow it with a block barrier.
HG_DEVICE void mbarrier_init_fence() {
#if !defined(HG_CUDA_EMULATION)  // the emulation's barriers are visible at once
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// mbarrier.arrive (release semantics: this thread's earlier accesses, e.g. reads of a stage
// the barrier hands back to the producer, happen before the phase completes).
HG_DEVICE void mbarrier_arrive(uint64_t* bar) {
#if defined(HG_CUDA_EMULATION)
  emu::mbarrier_arrive(bar);
#else
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
#endif
}

// mbarrier.arrive.expect_tx: one arrival that also tells the barrier to wait for `bytes`
// more bytes of async transactions (the TMA copies that complete_tx on it).
HG_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(HG_CUDA_EMULATION)
  emu::mbarrier_expect_tx(bar, bytes);
  emu::mbarrier_arrive(bar);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
#endif
}

// Waits until the phase with the given parity has completed (acquire semantics). A fresh
// barrier is in phase 0, so waiting on parity 1 returns at once: a producer waits on
// parity (phase ^ 1) for "slot is free" and the first pass through the ring does not block.
HG_DEVICE void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if defined(HG_CUDA_EMULATION)
  emu::mbarrier_wait_parity(bar, parity);
#else
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
#endif
}

}  // namespace hg::cuda
