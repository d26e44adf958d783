// Host entry points of the kernels that test the CUDA backend and its emulation
// (primitive_kernels.cu, block_kernels.cu). Each takes and returns host arrays: it copies
// them to cuda:0, launches one kernel through hg::cuda::launch and copies the results back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hg::test::kernels {

enum class MmaKind { f16, bf16, tf32 };
// warps * 32 lanes call the mma with their fragments: a[lane*4+i], b[lane*2+i], c/d[lane*4+i].
std::vector<float> mma(MmaKind kind, int warps, const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                       const std::vector<float>& c);

// One warp: `rows` holds 32 rows of 8 16-bit elements copied to shared memory; lane L passes
// the address of shared row row_of_lane[L] to ldmatrix .x<matrices> (.trans if asked).
// Returns register m of lane L at [L * matrices + m].
std::vector<uint32_t> ldmatrix(unsigned matrices, bool trans, const std::vector<uint16_t>& rows,
                               const std::vector<int>& row_of_lane);

enum class ShflKind { idx, up, down, bfly };
// `lanes` threads (one warp, lanes <= 32); lane L calls the shuffle with value[L], arg[L]
// (source lane, delta or lane mask), width and member mask `mask` if bit L of `active` is
// set; returns each lane's result (inactive lanes: 0).
std::vector<uint32_t> shfl(ShflKind kind, unsigned lanes, uint32_t active, uint32_t mask, const std::vector<uint32_t>& value,
                           const std::vector<uint32_t>& arg, int width);

// One warp; lanes in `active` vote with member mask `active` on pred[L]; returns per lane
// {ballot, all, any} at [3L..3L+2] (inactive lanes: 0).
std::vector<uint32_t> vote(uint32_t active, const std::vector<uint8_t>& pred);

// One warp; each lane queues three cp.async groups from `src` (described in the .cu) and
// returns its shared-memory view after wait<2>, wait<1> and wait<0>.
struct CpAsyncResult {
  std::vector<uint32_t> after_wait2, after_wait1, after_wait0;
};
CpAsyncResult cp_async(const std::vector<uint32_t>& src);

// blocks x threads threads each add to shared counters with the atomics; returns
// {float sum of 1s, int sum of thread ids, u64 sum of 2^40 + id, max id, CAS-counted increments}.
struct AtomicTotals {
  float f32_sum;
  int32_t i32_sum;
  unsigned long long u64_sum;
  int32_t i32_max;
  uint32_t cas_count;
};
AtomicTotals atomics(unsigned blocks, unsigned threads);

// Per-block sums of `values` by a shared-memory tree reduction (blocks of `threads`).
// racy = true leaves out the barrier between the stores and the first reduction step.
std::vector<int32_t> block_sums(const std::vector<int32_t>& values, unsigned threads, bool racy);

// Each block of a (bx, by) grid of (tx, ty) threads reverses its slice of `values` through
// dynamic shared memory of tx*ty floats; returns the result.
std::vector<float> reverse_blocks(const std::vector<float>& values, unsigned bx, unsigned by, unsigned tx, unsigned ty);

// Writes one element past the end of an n-float device tensor (into_shared: one past the
// block's dynamic shared memory). For the AddressSanitizer test: it must not survive.
void write_past_end(size_t n, bool into_shared);

// Emulation checks that must raise hg::Error: a shuffle whose member mask names a lane that
// exited (deadlock), a member mask without the caller, ldmatrix with a misaligned row.
void shfl_with_exited_lane();
void shfl_mask_without_self();
void ldmatrix_misaligned();

// Launches a trivial kernel with the given configuration (for the launcher's checks).
void launch_empty(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t smem);

}  // namespace hg::test::kernels
