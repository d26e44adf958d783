// The emulator's side of the sm_90 asynchronous instructions in cuda/primitives/ (mbarrier.h,
// tma.h, wgmma.h, barrier.h's named barriers): each call is one PTX instruction, executed on
// the block's state in cuda/emu/async_units.cpp. Their asynchrony is modelled, not hidden: a
// TMA copy lands at a later scheduling round (so reading a stage before its mbarrier phase
// completes reads stale bytes), a wgmma group runs when a wgmma.wait_group retires it (so
// accumulators read early are stale, and shared memory overwritten before the wait is what
// it reads), bulk stores read shared memory at their wait_group.read.
#pragma once
#include <cstdint>

#include "cuda/emu/driver_api.h"

namespace hg::cuda::emu {

// mbarrier.init / arrive (count arrivals) / expect_tx / complete_tx and the parity test of
// mbarrier.try_wait.parity; mbarrier_wait polls it. The barrier is the 8 bytes at bar.
void mbarrier_init(uint64_t* bar, uint32_t count);
void mbarrier_arrive(uint64_t* bar, uint32_t count = 1);
void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes);
bool mbarrier_test_parity(const uint64_t* bar, uint32_t parity);
void mbarrier_wait_parity(uint64_t* bar, uint32_t parity);

// cp.async.bulk.tensor.Nd global -> shared::cluster (this CTA), completing on bar.
void tma_load(void* smem_dst, const void* tensor_map, uint64_t* bar, const int32_t* coords, int rank);
// cp.async.bulk.tensor.Nd global <- shared::cta into the calling thread's open bulk group;
// cp.async.bulk.commit_group; cp.async.bulk.wait_group.read N.
void tma_store(const void* tensor_map, const void* smem_src, const int32_t* coords, int rank);
void bulk_commit();
void bulk_wait_read(unsigned groups_left_pending);

// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16|bf16}: queued on the warpgroup with this
// thread's accumulator registers (N / 2 floats); wgmma.commit_group; wgmma.wait_group N.
enum class WgmmaType : uint8_t { f16, bf16 };
void wgmma_issue(WgmmaType type, int n, uint64_t a_desc, bool a_mn_major, uint64_t b_desc, bool b_mn_major,
                 bool scale_d, float* acc);
void wgmma_commit();
void wgmma_wait(unsigned groups_left_pending);

// bar.sync id, count: named barrier `id` (1..15; 0 is __syncthreads) opens once `count`
// threads (a multiple of 32) have arrived.
void named_barrier_sync(unsigned id, unsigned count);

}  // namespace hg::cuda::emu
