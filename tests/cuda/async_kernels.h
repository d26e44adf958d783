// Host entry points of async_kernels.cu: small kernels that drive the emulation's sm_90
// asynchronous units (mbarrier, TMA, wgmma, named barriers) for tests/cuda/test_async_units.cpp.
// Each copies its data to cuda:0, launches, copies back. Emulation builds only.
#pragma once
#include <cstdint>
#include <vector>

namespace hg::test::kernels {

// The tiles of the TMA and wgmma kernels: rows of 64 16-bit elements (128 bytes), stored in
// shared memory with the 128-byte swizzle.
constexpr int kTileCols = 64;

// A ring of `stages` shared-memory stages: one producer warp writes 64 words per iteration
// (values[it * 64 + i]), two consumer warps wait on the stage's full barrier, each thread adds
// its word to its sum and arrives on the empty barrier. Returns the 64 consumer sums.
std::vector<uint32_t> mbarrier_ring(const std::vector<uint32_t>& values, int stages, int iterations);

// One barrier (count 2) through two phases, each loading a 16-row tile of `global` (64 x 32,
// row-major) by TMA; the flags the kernel records, in order, are listed in the test.
std::vector<uint32_t> mbarrier_phases(const std::vector<uint16_t>& global);

enum class MbarrierMisuse { uninitialised, extra_arrival, never_completes, outside_dynamic, misaligned };
void mbarrier_misuse(MbarrierMisuse kind);

// A TMA load (128B swizzle, 16 x 64 box) of `global` (`rows` x 64, row-major) at row `row0`:
// `before` is the tile (read through the swizzle by hand) as the issuing thread sees it right
// after the issue, `after` once the mbarrier phase has completed.
struct TmaLoadSeen {
  std::vector<uint16_t> before, after;
};
TmaLoadSeen tma_load_seen(const std::vector<uint16_t>& global, int rows, int row0);

// A 16 x 64 `tile` written to shared memory through the 128B swizzle by hand, then stored by
// tma_store_3d at (col0, row0) into a tensor of `cols` x `rows` (row pitch 64 elements) inside
// `global` (its first `rows` rows), after which shared memory is overwritten. Returns `global`.
std::vector<uint16_t> tma_store(const std::vector<uint16_t>& tile, std::vector<uint16_t> global, int cols, int rows,
                                int col0, int row0);

// One warpgroup multiplies A (64 x 64, K-major) by B (128 x 64, K-major), given as f16 or bf16
// bits, with m64n128k16: group 1 (k slices 0, 1) into acc1, group 2 (slices 2, 3) into acc2,
// both starting at `init`. Each result is a 64 x 128 row-major matrix assembled from the
// threads' fragments.
struct WgmmaSeen {
  std::vector<float> acc1_before_wait;  // acc1 read right after group 1's commit
  std::vector<float> acc1_after_wait1;  // after wgmma_wait<1>
  std::vector<float> acc2_after_wait1;  // after wgmma_wait<1>: group 2 still pending
  std::vector<float> acc2_after_wait0;  // after wgmma_wait<0>
};
WgmmaSeen wgmma_two_groups(bool bf16, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, float init);

enum class WgmmaMisuse { divergent_descriptor, partial_warpgroup };
void wgmma_misuse(WgmmaMisuse kind);

// Two warpgroups, each on its own named barrier (ids 1 and 2, count 128), for `rounds`
// rounds: every thread writes a word, syncs, adds its warpgroup neighbour's word to its sum,
// syncs. Returns the 256 sums.
std::vector<uint32_t> named_barrier_exchange(int rounds);
// 128 threads call bar.sync id, count.
void named_barrier_misuse(unsigned id, unsigned count);

}  // namespace hg::test::kernels
