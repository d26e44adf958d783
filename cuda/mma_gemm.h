// The tensor-core GEMM engine: out(z, i, j) = epilogue(sum_k A(z, i, k) * B(z, k, j)),
// accumulated in f32 by mma.sync (f16, bf16, tf32 or 3xTF32), operands staged in shared
// memory by a multi-stage cp.async pipeline. Matmul and implicit-GEMM convolution both run
// on it; they differ only in their operand sources. Include from .cu files only.
//
// Operand sources (their contract) and how they are staged: cuda/mma_operands.h.
//
// The output functor is called once per element inside the matrix as out(z, i, j, acc)
// with the f32 sum; Epilogue below is the usual one (alpha, bias, ReLU, one rounding). The
// accumulators reach it through shared memory, row by row, so consecutive threads write
// consecutive columns (coalesced) and no per-element output address lives in a register
// across the K loop (ptxas kept them there: that, not the mma fragments, cost the registers).
//
// Shared memory: per stage, A then B, as cuda/mma_smem_layout.h lays them out (ldmatrix and
// the f32 fragment reads conflict-free); after the K loop the same memory holds the tile's
// f32 accumulators. Blocks take tiles in cuda/mma_tile_order.h's grouped order.
//
// Split-K (cuda/gemm_plan.h decides when): with out = SplitPartials the kernel's work items
// are (tile, chunk of K) pairs, and each writes its f32 partial tile to the workspace;
// splitk_reduce_kernel then adds the chunks of each element in chunk order and calls the
// real epilogue once. mma_gemm_planned() runs either form as the plan says.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/caching_allocator.h"
#include "cuda/device_types.h"
#include "cuda/gemm_plan.h"
#include "cuda/kernel_log.h"
#include "cuda/launch.h"
#include "cuda/mma_operands.h"
#include "cuda/mma_smem_layout.h"
#include "cuda/mma_tile_order.h"
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/cp_async.h"
#include "cuda/primitives/ldmatrix.h"
#include "cuda/primitives/mma.h"
#include "cuda/primitives/mma_layout.h"
#include "cuda/primitives/shared_memory.h"

namespace hg::cuda {

// f16 / bf16: m16n8k16 on the stored values. tf32: one m16n8k8 on tf32-rounded f32.
// tf32x3: x = big + small with big = tf32(x), small = tf32(x - big); the sum of
// small*big + big*small + big*big (small*small dropped) keeps about f32 accuracy.
enum class MmaMode : uint8_t { f16, bf16, tf32, tf32x3 };

// A block tile BM x BN stepping BK along k, split into warp tiles WM x WN; Stages tiles of
// A and B in flight. BK is in elements: 32 for 16-bit inputs, 16 for f32 (64 bytes a line).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int Stages_ = 3, int MinBlocks_ = 1>
struct MmaTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, Stages = Stages_, kMinBlocks = MinBlocks_;
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN, kThreads = 32 * kWarpsM * kWarpsN;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0 && Stages >= 2,
                "tile shapes must be multiples of the mma shapes");
};
// 8 warps of 64 x 32 for problems that fill the GPU; 4 warps of 32 x 32 for small M or N.
// TwoBlocks: the large tile in at most 128 registers, so two blocks (16 warps) share an SM;
// ptxas fits it without spills only for kAligned sources (every mode at sm_80; at sm_90a
// one 3xTF32 layout spills 4 bytes, see docs/cuda-kernels.md). The other sources
// (convolution's, unaligned matrices) keep one block per SM and up to 255 registers.
// FourBlocks: the small tile in at most 128 registers, four blocks (16 warps) per SM; every
// source fits without spills except convolution's in 3xTF32 (twice the fragments).
template <class E, bool TwoBlocks = false>
using MmaTileLarge = MmaTile<128, 128, 64 / sizeof(E), 64, 32, 3, TwoBlocks ? 2 : 1>;
template <class E, bool FourBlocks = true>
using MmaTileSmall = MmaTile<64, 64, 64 / sizeof(E), 32, 32, 3, FourBlocks ? 4 : 1>;
// For N <= 32 (convolutions with few channels, narrow heads): half the small tile's
// columns, so fewer of its MMAs multiply zeros; 4 warps of 32 x 16.
template <class E, bool FourBlocks = true>
using MmaTileNarrow = MmaTile<64, 32, 64 / sizeof(E), 32, 16, 3, FourBlocks ? 4 : 1>;

// The output of a split-K pass: chunk s's f32 partial sum of element (z, i, j) at
// p[((s * batches + z) * M + i) * N + j]. The kernel recognises this type and then walks
// (tile, chunk) pairs, chunk s covering k in [s * k_chunk, min(K, (s + 1) * k_chunk)).
struct SplitPartials {
  float* p;
  int64_t batches, split, k_chunk;
};
template <class Out>
constexpr bool kIsSplitPartials = std::is_same_v<Out, SplitPartials>;

// The f32 output tile's row pitch while it is staged: with 8 words of padding the 8-byte
// accumulator stores of each half warp (4 rows by 4 column pairs) hit 32 distinct banks.
template <class Tile>
constexpr int kMmaOutPitch = Tile::BN + 8;

// The operand stages, or the staged output tile where that is larger.
template <class Tile, class SrcA, class SrcB>
constexpr size_t mma_gemm_shared_bytes() {
  using OpA = StagedOperand<SrcA, Tile::BM, Tile::BK>;
  using OpB = StagedOperand<SrcB, Tile::BN, Tile::BK>;
  const size_t stages =
      size_t{Tile::Stages} * (OpA::kElems * sizeof(typename OpA::E) + OpB::kElems * sizeof(typename OpB::E));
  return std::max(stages, size_t{Tile::BM} * kMmaOutPitch<Tile> * sizeof(float));
}

namespace mma_detail {

HG_DEVICE float f32_from_bits(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// Two adjacent f32 accumulators, stored to the staged output tile in one 8-byte access.
struct alignas(8) F32Pair {
  float lo, hi;
};

// The f32 fragments of a tf32 mma: x rounded to tf32 (`small` = false) or the tf32 of
// what that rounding left out (`small` = true; 0 where x is not finite, so an inf input
// gives inf, not inf - inf).
HG_DEVICE uint32_t tf32_part(float x, bool small) {
  const uint32_t big = f32_to_tf32(x);
  if (!small) return big;
  const float rest = x - f32_from_bits(big);
  return rest == rest ? f32_to_tf32(rest) : 0u;
}

}  // namespace mma_detail

// The number of K chunks a kernel's output stands for: 1 unless it is SplitPartials (a
// constant, so the unsplit kernels compile as before).
template <class Out>
HG_DEVICE constexpr int64_t split_chunks(const Out& out) {
  if constexpr (kIsSplitPartials<Out>) return out.split;
  else return 1;
}

// Natively one block per tile; tile counts above the grid limits loop (every bound tested is
// the block's, so all its threads reach the same barriers). Tiles are numbered in
// grouped_tile's order along gridDim.x, batch entries along gridDim.z.
template <class Tile, MmaMode Mode, class SrcA, class SrcB, class Out>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    mma_gemm_kernel(int64_t batches, int64_t M, int64_t N, int64_t K, SrcA a, SrcB b, Out out) {
  using OpA = StagedOperand<SrcA, Tile::BM, Tile::BK>;
  using OpB = StagedOperand<SrcB, Tile::BN, Tile::BK>;
  using EA = typename OpA::E;
  using EB = typename OpB::E;
  constexpr int MI = Tile::WM / 16, NI = Tile::WN / 8, S = Tile::Stages, BK = Tile::BK;
  constexpr bool kTf32 = Mode == MmaMode::tf32 || Mode == MmaMode::tf32x3;
  constexpr int kOutPitch = kMmaOutPitch<Tile>;
  constexpr int64_t kTileGroup = 8;  // M tiles per band of the block order
  using Input = std::conditional_t<kTf32, float, std::conditional_t<Mode == MmaMode::f16, half, bfloat16>>;
  static_assert(std::is_same_v<EA, Input> && std::is_same_v<EB, Input>,
                "the sources' element type must be the mma mode's input type");

  EA* const smem_a = dynamic_shared_memory<EA>();
  EB* const smem_b = reinterpret_cast<EB*>(smem_a + S * OpA::kElems);
  const int t = static_cast<int>(threadIdx.x), lane = t % 32, warp = t / 32;
  const int wm0 = warp % Tile::kWarpsM * Tile::WM, wn0 = warp / Tile::kWarpsM * Tile::WN;
  const int64_t m_tiles = (M + Tile::BM - 1) / Tile::BM, n_tiles = (N + Tile::BN - 1) / Tile::BN;
  mma_detail::OperandLoader<OpA, SrcA, Tile::kThreads> load_a;
  mma_detail::OperandLoader<OpB, SrcB, Tile::kThreads> load_b;

  for (int64_t z = blockIdx.z; z < batches; z += gridDim.z)
    for (int64_t item = blockIdx.x; item < m_tiles * n_tiles * split_chunks(out); item += gridDim.x) {
      // Unsplit: item is the tile. Split: the chunks of a tile are consecutive items.
      const int64_t tile = item / split_chunks(out), chunk = item % split_chunks(out);
      const TileCoord tc = grouped_tile(tile, m_tiles, n_tiles, kTileGroup);
      const int64_t m0 = tc.m * Tile::BM, n0 = tc.n * Tile::BN;
      // This item's k range [k_begin, k_end): all of K, or its chunk (k_chunk is a multiple of BK).
      int64_t k_begin = 0, k_end = K;
      if constexpr (kIsSplitPartials<Out>) k_begin = chunk * out.k_chunk, k_end = std::min(K, k_begin + out.k_chunk);
      const int64_t k_tiles = (k_end - k_begin + BK - 1) / BK;
      load_a.start_tile(a, t, z, m0, M);
      load_b.start_tile(b, t, z, n0, N);
      const auto stage = [&](int64_t kt) {
        const int s = static_cast<int>(kt % S);
        load_a.load(a, t, z, m0, M, k_begin + kt * BK, k_end, smem_a + s * OpA::kElems);
        load_b.load(b, t, z, n0, N, k_begin + kt * BK, k_end, smem_b + s * OpB::kElems);
      };
      float acc[MI][NI][4] = {};
      // One commit group per k step (empty past the end), so wait<S-2> always means
      // "step kt has landed".
      HG_MMA_UNROLL
      for (int s = 0; s < S - 1; ++s) {
        if (s < k_tiles) stage(s);
        cp_async_commit();
      }
      for (int64_t kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<S - 2>();
        sync_threads();  // step kt is visible to all, and step kt-1's buffer is free
        if (kt + S - 1 < k_tiles) stage(kt + S - 1);
        cp_async_commit();
        const EA* As = smem_a + kt % S * OpA::kElems;
        const EB* Bs = smem_b + kt % S * OpB::kElems;
        if constexpr (!kTf32) {
          HG_MMA_UNROLL
          for (int kk = 0; kk < BK; kk += 16) {
            uint32_t af[MI][4], bf[NI][2];
            HG_MMA_UNROLL
            for (int mi = 0; mi < MI; ++mi) {
              const RowCol o = ldmatrix_a_element(lane, OpA::kK);
              const EA* row = As + OpA::at(wm0 + mi * 16 + o.row, kk + o.col);
              if constexpr (OpA::kK) ldmatrix_x4(af[mi], row);
              else ldmatrix_x4_trans(af[mi], row);
            }
            HG_MMA_UNROLL
            for (int nj = 0; nj < NI; nj += 2) {
              const RowCol o = ldmatrix_b_element(lane, OpB::kK);
              const EB* row = Bs + OpB::at(wn0 + nj * 8 + o.row, kk + o.col);
              uint32_t r[4];
              if constexpr (OpB::kK) ldmatrix_x4(r, row);
              else ldmatrix_x4_trans(r, row);
              bf[nj][0] = r[0], bf[nj][1] = r[1], bf[nj + 1][0] = r[2], bf[nj + 1][1] = r[3];
            }
            HG_MMA_UNROLL
            for (int mi = 0; mi < MI; ++mi)
              HG_MMA_UNROLL
              for (int nj = 0; nj < NI; ++nj) {
                if constexpr (Mode == MmaMode::f16) mma_m16n8k16_f16(acc[mi][nj], af[mi], bf[nj], acc[mi][nj]);
                else mma_m16n8k16_bf16(acc[mi][nj], af[mi], bf[nj], acc[mi][nj]);
              }
          }
        } else {
          constexpr int kParts = Mode == MmaMode::tf32x3 ? 2 : 1;  // [0] big, [1] small
          HG_MMA_UNROLL
          for (int kk = 0; kk < BK; kk += 8) {
            uint32_t af[MI][kParts][4], bf[NI][kParts][2];
            HG_MMA_UNROLL
            for (int mi = 0; mi < MI; ++mi)
              HG_MMA_UNROLL
              for (int i = 0; i < 4; ++i) {
                const RowCol rc = mma_m16n8k8_tf32_a(lane, i);
                const float x = As[OpA::at(wm0 + mi * 16 + rc.row, kk + rc.col)];
                HG_MMA_UNROLL
                for (int p = 0; p < kParts; ++p) af[mi][p][i] = mma_detail::tf32_part(x, p == 1);
              }
            HG_MMA_UNROLL
            for (int nj = 0; nj < NI; ++nj)
              HG_MMA_UNROLL
              for (int i = 0; i < 2; ++i) {
                const RowCol rc = mma_m16n8k8_tf32_b(lane, i);
                const float x = Bs[OpB::at(wn0 + nj * 8 + rc.col, kk + rc.row)];
                HG_MMA_UNROLL
                for (int p = 0; p < kParts; ++p) bf[nj][p][i] = mma_detail::tf32_part(x, p == 1);
              }
            HG_MMA_UNROLL
            for (int mi = 0; mi < MI; ++mi)
              HG_MMA_UNROLL
              for (int nj = 0; nj < NI; ++nj) {
                // The small cross terms first, so they are not lost below big*big's ulp.
                if constexpr (kParts == 2) {
                  mma_m16n8k8_tf32(acc[mi][nj], af[mi][1], bf[nj][0], acc[mi][nj]);
                  mma_m16n8k8_tf32(acc[mi][nj], af[mi][0], bf[nj][1], acc[mi][nj]);
                }
                mma_m16n8k8_tf32(acc[mi][nj], af[mi][0], bf[nj][0], acc[mi][nj]);
              }
          }
        }
      }
      cp_async_wait<0>();
      sync_threads();  // every warp is done with the operands: their memory now stages the output
      float* const cs = reinterpret_cast<float*>(smem_a);
      HG_MMA_UNROLL
      for (int mi = 0; mi < MI; ++mi)
        HG_MMA_UNROLL
        for (int nj = 0; nj < NI; ++nj)
          HG_MMA_UNROLL
          for (int i = 0; i < 4; i += 2) {  // {i, i + 1} are adjacent columns: one 8-byte store
            const RowCol rc = mma_m16n8_c(lane, i);
            *reinterpret_cast<mma_detail::F32Pair*>(cs + (wm0 + mi * 16 + rc.row) * kOutPitch + wn0 + nj * 8 + rc.col) =
                {acc[mi][nj][i], acc[mi][nj][i + 1]};
          }
      sync_threads();  // the whole tile is staged
      const int64_t rows = std::min<int64_t>(Tile::BM, M - m0), cols = std::min<int64_t>(Tile::BN, N - n0);
      HG_MMA_NO_UNROLL  // unrolled, ptxas spills the two-block kernels for some outputs (f16 in, f32 out)
      for (int e = t; e < Tile::BM * Tile::BN; e += Tile::kThreads) {  // along rows: coalesced
        const int r = e / Tile::BN, c = e % Tile::BN;
        if (r < rows && c < cols) {
          if constexpr (kIsSplitPartials<Out>) out.p[((chunk * batches + z) * M + m0 + r) * N + n0 + c] = cs[r * kOutPitch + c];
          else out(z, m0 + r, n0 + c, cs[r * kOutPitch + c]);
        }
      }
      sync_threads();  // the staged output is read before the next tile's loads overwrite it
    }
}

// out(z, i, j) = round(alpha * acc + bias[j]), ReLU'd if asked, stored as T at
// p[z * batch_stride + i * row_stride + j]. One rounding into T (f32 arithmetic before it).
template <class T, class BiasT = T>
struct Epilogue {
  T* p;
  int64_t batch_stride, row_stride;
  const BiasT* bias = nullptr;
  float alpha = 1.0f;
  bool relu = false;
  HG_DEVICE void operator()(int64_t z, int64_t i, int64_t j, float acc) const {
    float v = alpha * acc;
    if (bias) v += static_cast<float>(dev_load(bias[j]));
    if (relu && v < 0.0f) v = 0.0f;  // NaN stays NaN
    p[z * batch_stride + i * row_stride + j] = dev_store<T>(v);
  }
};

// Split-K's second pass: out(z, i, j, sum over s = 0, 1, ..., split-1 of the partials), the
// chunks added in that fixed order, one thread per output element (consecutive threads,
// consecutive columns).
template <class Out>
__global__ void splitk_reduce_kernel(const float* partials, int64_t batches, int64_t M, int64_t N, int64_t split,
                                     Out out) {
  const int64_t total = batches * M * N;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    float sum = partials[e];
    for (int64_t s = 1; s < split; ++s) sum += partials[s * total + e];
    const int64_t j = e % N, i = e / N % M, z = e / (M * N);
    out(z, i, j, sum);
  }
}

// Launches mma_gemm_kernel with tile config Tile on `device`'s current stream. Grids are
// capped as simt_gemm's are; the kernel loops over the tiles beyond them.
template <class Tile, MmaMode Mode, class SrcA, class SrcB, class Out>
void mma_gemm(int device, const char* name, int64_t batches, int64_t M, int64_t N, int64_t K, const SrcA& a,
              const SrcB& b, const Out& out) {
  if (batches == 0 || M == 0 || N == 0) return;
  const auto cap = [](int64_t tiles, int64_t limit) { return static_cast<unsigned>(std::min(tiles, limit)); };
  int64_t split = 1;
  if constexpr (kIsSplitPartials<Out>) split = out.split;
  const dim3 grid(cap((M + Tile::BM - 1) / Tile::BM * ((N + Tile::BN - 1) / Tile::BN) * split, int64_t{1} << 20), 1,
                  cap(batches, 65535));
  static const std::string variant = "mma.sync " + std::to_string(Tile::BM) + "x" + std::to_string(Tile::BN) +
                                     (kIsSplitPartials<Out> ? ", split-K" : "");
  launch(mma_gemm_kernel<Tile, Mode, SrcA, SrcB, Out>,
         {.grid = grid,
          .block = dim3(Tile::kThreads),
          .shared_bytes = mma_gemm_shared_bytes<Tile, SrcA, SrcB>(),
          .stream = current_stream(device),
          .name = kernel_label(name, variant)},
         batches, M, N, K, a, b, out);
}

// Runs the product with Tile as `plan` says (cuda/gemm_plan.h): in one pass, or split-K
// with a workspace of plan.split x batches x M x N f32 from the caching allocator (freed on
// the same stream after the reduction, so it is reused only by later work) and
// splitk_reduce_kernel. plan must have been made for these sizes and Tile's k-step.
template <class Tile, MmaMode Mode, class SrcA, class SrcB, class Out>
void mma_gemm_split(int device, const char* name, const GemmTilePlan& plan, int64_t batches, int64_t M, int64_t N,
                    int64_t K, const SrcA& a, const SrcB& b, const Out& out) {
  if (plan.split <= 1 || batches == 0 || M == 0 || N == 0) return mma_gemm<Tile, Mode>(device, name, batches, M, N, K, a, b, out);
  const size_t bytes = static_cast<size_t>(plan.split) * static_cast<size_t>(batches * M * N) * sizeof(float);
  CachingAllocator& alloc = caching_allocator(device);
  float* ws = static_cast<float*>(alloc.allocate(bytes, current_stream(device)));
  try {
    mma_gemm<Tile, Mode>(device, name, batches, M, N, K, a, b, SplitPartials{ws, batches, plan.split, plan.k_chunk});
    const int64_t total = batches * M * N;
    launch(splitk_reduce_kernel<Out>,
           {.grid = dim3(static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, int64_t{1} << 16))),
            .block = dim3(256),
            .stream = current_stream(device),
            .name = kernel_label(name, "split-K reduction")},
           static_cast<const float*>(ws), batches, M, N, static_cast<int64_t>(plan.split), out);
  } catch (...) {
    alloc.deallocate(ws, bytes);
    throw;
  }
  alloc.deallocate(ws, bytes);
}

}  // namespace hg::cuda
