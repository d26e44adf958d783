// The Hopper (sm_90a) GEMM kernel: one producer warpgroup streams A and B tiles with TMA
// into a ring of shared-memory stages (mbarriers full/empty), two consumer warpgroups
// multiply them with wgmma and write the epilogue through shared memory with TMA stores;
// persistent CTAs walk the output tiles in hopper_tile()'s L2-friendly order. Included by
// the four kernel units (cuda/hopper_gemm_launch.h says why four); the host side, maps and
// fallbacks are in cuda/hopper_gemm.cpp, the contract in cuda/hopper_gemm.h.
#pragma once
#include <cmath>
#include <type_traits>

#include "cuda/device_types.h"
#include "cuda/hopper_gemm_launch.h"
#include "cuda/launch.h"
#include "cuda/primitives/shared_memory.h"

// The device code exists only in the sm_90a image; the sm_80 image gets empty kernels, which
// the host never launches (it checks the device and the image's binary version first). The
// emulation runs it on an emulated sm_90 device (cuda/emu/async_units.cpp).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(HG_CUDA_EMULATION)
#define HG_HOPPER_DEVICE_CODE 1
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/mbarrier.h"
#include "cuda/primitives/smem_swizzle.h"
#include "cuda/primitives/tma.h"
#include "cuda/primitives/wgmma.h"
#endif

namespace hg::cuda::hopper {

#if defined(HG_HOPPER_DEVICE_CODE)
__device__ __forceinline__ float load_bias(const Params& p, int64_t col) {
  switch (p.bias_kind) {
    case BiasKind::f32: return static_cast<const float*>(p.bias)[col];
    case BiasKind::f16: return dev_load(static_cast<const half*>(p.bias)[col]);
    case BiasKind::bf16: return dev_load(static_cast<const bfloat16*>(p.bias)[col]);
    default: return 0.0f;
  }
}

// relu?(fma(alpha, acc, bias)) in f32, before the one rounding to the output type.
__device__ __forceinline__ float epilogue(const Params& p, float acc, float bias) {
  const float v = ::fmaf(p.alpha, acc, bias);
  return p.relu ? ::fmaxf(v, 0.0f) : v;
}

template <class Out>
struct alignas(2 * sizeof(Out)) OutPair {
  Out x, y;
};

// Direct stores (C not TMA-storable): the two values are columns col, col + 1.
template <class Out>
__device__ __forceinline__ void store_pair(const Params& p, Out* dst, int64_t col, float v0, float v1) {
  if (col + 1 < p.N && p.pair_stores) {
    *reinterpret_cast<OutPair<Out>*>(dst) = OutPair<Out>{dev_store<Out>(v0), dev_store<Out>(v1)};
  } else {
    if (col < p.N) dst[0] = dev_store<Out>(v0);
    if (col + 1 < p.N) dst[1] = dev_store<Out>(v1);
  }
}

// The producer: one thread issues the TMA copies of each stage once the consumers have
// released it; the full barrier completes when its one arrival and the stage's bytes land
// (out-of-bounds box elements are zero-filled and still count as transferred bytes).
template <bool AMMajor, bool BNMajor, int TileN>
__device__ __forceinline__ void produce(const Params& p, const CUtensorMap* map_a, const CUtensorMap* map_b,
                                        uint8_t* smem_a, uint8_t* smem_b, uint64_t* full, uint64_t* empty) {
  const int64_t k_blocks = (p.K + kTileK - 1) / kTileK;
  int stage = 0;
  uint32_t phase = 0;
  for (int64_t t = blockIdx.x; t < p.tiles; t += gridDim.x) {
    const HopperTile tile = hopper_tile(t, p.tiles_m, p.tiles_n);
    const auto m0 = static_cast<int32_t>(tile.tile_m * kHopperTileM), n0 = static_cast<int32_t>(tile.tile_n * TileN);
    const auto za = static_cast<int32_t>(p.a_batched ? tile.z : 0), zb = static_cast<int32_t>(p.b_batched ? tile.z : 0);
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      mbarrier_wait(&empty[stage], phase ^ 1);
      mbarrier_arrive_expect_tx(&full[stage], kStageBytes<TileN>);
      const auto k0 = static_cast<int32_t>(kb * kTileK);
      uint8_t* b_stage = smem_b + stage * kTileBBytes<TileN>;
      uint8_t* a_stage = smem_a + stage * kTileABytes;
      if constexpr (AMMajor) {  // two boxes of 64 M-rows, each 64 K deep
        tma_load_3d(a_stage, map_a, &full[stage], m0, k0, za);
        tma_load_3d(a_stage + kBoxBytes, map_a, &full[stage], m0 + 64, k0, za);
      } else {
        tma_load_3d(a_stage, map_a, &full[stage], k0, m0, za);
      }
      if constexpr (BNMajor) {  // boxes of 64 N-columns, each 64 K-rows deep
#pragma unroll
        for (int b = 0; b < TileN / 64; ++b) tma_load_3d(b_stage + b * kBoxBytes, map_b, &full[stage], n0 + 64 * b, k0, zb);
      } else {
        tma_load_3d(b_stage, map_b, &full[stage], k0, n0, zb);
      }
      if (++stage == kStages<TileN>) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

// Each thread's accumulators through the epilogue into the consumer's staging buffer, one box
// of columns at a time (64 rows x 128 bytes: 64 16-bit or 32 f32 columns, 128B-swizzled as the
// C map says, which also spreads a warp's 8 rows over all 32 banks); the buffer holds two
// boxes, filled alternately, so one box is written while the other's TMA store reads it. One
// thread issues the stores, which clip rows and columns past the matrix. (A box at a time also
// bounds the bias values loaded ahead: 256-wide tiles keep 128 accumulators live.)
template <class Out, int TileN>
__device__ __forceinline__ void store_staged(const Params& p, const CUtensorMap* map_c, const HopperTile& tile,
                                             int consumer, const float (&acc)[TileN / 2], uint8_t* staging) {
  constexpr int kBoxCols = 128 / static_cast<int>(sizeof(Out));
  static_assert(TileN / kBoxCols % 2 == 0, "a tile is an even number of boxes: the next tile's first box reuses buffer 0");
  const int t = static_cast<int>(threadIdx.x) % kWarpgroup, warp = t / 32, lane = t % 32;
  const unsigned bar = 1 + consumer;  // named barrier of this warpgroup (0 is __syncthreads)
  const int64_t col0 = tile.tile_n * TileN;
  const auto row0 = static_cast<int32_t>(tile.tile_m * kHopperTileM + consumer * 64);
#pragma unroll
  for (int box = 0; box < TileN / kBoxCols; ++box) {
    uint8_t* buffer = staging + (box % 2) * kBoxBytes;
    if (t == 0) tma_store_wait_read<1>();  // the store that read this buffer, two boxes ago, is done
    named_barrier_sync(bar, kWarpgroup);
#pragma unroll
    for (int jj = 0; jj < kBoxCols / 8; ++jj) {
      const int j = box * kBoxCols / 8 + jj, col = 8 * jj + 2 * (lane % 4);  // col: inside the box
      const int64_t gcol = col0 + box * kBoxCols + col;
      const float b0 = gcol < p.N ? load_bias(p, gcol) : 0.0f, b1 = gcol + 1 < p.N ? load_bias(p, gcol + 1) : 0.0f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp * 16 + lane / 4 + 8 * h;
        const auto offset = static_cast<uint32_t>(row * 128 + col * static_cast<int>(sizeof(Out)));
        *reinterpret_cast<OutPair<Out>*>(buffer + swizzle_smem_address(offset, 128)) =
            OutPair<Out>{dev_store<Out>(epilogue(p, acc[4 * j + 2 * h], b0)),
                         dev_store<Out>(epilogue(p, acc[4 * j + 2 * h + 1], b1))};
      }
    }
    fence_proxy_async_shared();  // this thread's writes, before the async proxy's store reads them
    named_barrier_sync(bar, kWarpgroup);
    if (t == 0) {
      tma_store_3d(map_c, buffer, static_cast<int32_t>(col0 + box * kBoxCols), row0, static_cast<int32_t>(tile.z));
      tma_store_commit();
    }
  }
}

// Fallback epilogue: thread (warp, lane) holds rows r0 and r0 + 8, columns 8 j + 2 (lane % 4)
// + {0, 1}, and stores them where they go.
template <class Out, int TileN>
__device__ __forceinline__ void store_direct(const Params& p, const HopperTile& tile, int consumer,
                                             const float (&acc)[TileN / 2]) {
  const int t = static_cast<int>(threadIdx.x) % kWarpgroup, warp = t / 32, lane = t % 32;
  const int64_t r0 = tile.tile_m * kHopperTileM + consumer * 64 + warp * 16 + lane / 4;
  Out* c = static_cast<Out*>(p.c) + tile.z * p.batch_stride_c;
  // Fully unrolled, so that acc stays in registers (a runtime index would put it in memory).
#pragma unroll
  for (int j = 0; j < TileN / 8; ++j) {
    const int64_t col = tile.tile_n * TileN + 8 * j + 2 * (lane % 4);
    if (col >= p.N) continue;
    const float b0 = load_bias(p, col), b1 = col + 1 < p.N ? load_bias(p, col + 1) : 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = r0 + 8 * h;
      if (row < p.M)
        store_pair<Out>(p, c + row * p.ldc + col, col, epilogue(p, acc[4 * j + 2 * h], b0),
                        epilogue(p, acc[4 * j + 2 * h + 1], b1));
    }
  }
}

// A consumer warpgroup computes rows [64 * consumer, 64 * consumer + 64) of each tile: per
// stage four k16 wgmmas, one commit group; the group of the previous stage is waited for
// (wait_group 1) before that stage is handed back, so one stage of MMAs is always in flight.
template <class In, class Out, bool AMMajor, bool BNMajor, int TileN>
__device__ __forceinline__ void consume(const Params& p, const CUtensorMap* map_c, int consumer, uint8_t* smem_a,
                                        uint8_t* smem_b, uint8_t* staging, uint64_t* full, uint64_t* empty) {
  constexpr WgmmaAB kAB = std::is_same_v<In, half> ? WgmmaAB::f16 : WgmmaAB::bf16;
  const int64_t k_blocks = (p.K + kTileK - 1) / kTileK;
  const uint32_t a_base = smem_address(smem_a) + consumer * kBoxBytes, b_base = smem_address(smem_b);
  float acc[TileN / 2];
  int stage = 0;
  uint32_t phase = 0;
  for (int64_t tt = blockIdx.x; tt < p.tiles; tt += gridDim.x) {
    const HopperTile tile = hopper_tile(tt, p.tiles_m, p.tiles_n);
    int prev = -1;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      mbarrier_wait(&full[stage], phase);
      const uint32_t a_addr = a_base + stage * kTileABytes, b_addr = b_base + stage * kTileBBytes<TileN>;
#pragma unroll
      for (float& r : acc) wgmma_fence_operand(r);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kTileK / 16; ++ks) {
        const uint64_t b_desc = BNMajor ? wgmma_mnmajor_sw128_descriptor(b_addr, ks, kBoxBytes)
                                        : wgmma_kmajor_sw128_descriptor(b_addr, ks);
        const uint64_t a_desc = AMMajor ? wgmma_mnmajor_sw128_descriptor(a_addr, ks, kBoxBytes)
                                        : wgmma_kmajor_sw128_descriptor(a_addr, ks);
        wgmma_m64k16<TileN, kAB, AMMajor, BNMajor>(acc, a_desc, b_desc, kb > 0 || ks > 0);
      }
      wgmma_commit();
#pragma unroll
      for (float& r : acc) wgmma_fence_operand(r);
      wgmma_wait<1>();
      if (prev >= 0) mbarrier_arrive(&empty[prev]);
      prev = stage;
      if (++stage == kStages<TileN>) {
        stage = 0;
        phase ^= 1;
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (float& r : acc) wgmma_fence_operand(r);
    mbarrier_arrive(&empty[prev]);
    if (p.staged_store) store_staged<Out, TileN>(p, map_c, tile, consumer, acc, staging);
    else store_direct<Out, TileN>(p, tile, consumer, acc);
  }
  // The last tile's store must have read the staging tile before the block's shared memory goes.
  if (p.staged_store && threadIdx.x % kWarpgroup == 0) tma_store_wait_read<0>();
}
#endif

template <class In, class Out, bool AMMajor, bool BNMajor, int TileN>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       const __grid_constant__ CUtensorMap map_c, const Params p) {
#if defined(HG_HOPPER_DEVICE_CODE)
  // Register budgets after setmaxnreg: 40 + 2 x 232 per thread-slot of 128 = 504 <= 3 x 168
  // (65536 registers / 384 threads, rounded down to 8), what __launch_bounds__ gives at entry.
  constexpr int kProducerRegs = 40, kConsumerRegs = 232, Stages = kStages<TileN>;
  uint8_t* raw = dynamic_shared_memory<uint8_t>();
  uint8_t* smem_a = raw + ((1024u - (smem_address(raw) & 1023u)) & 1023u);
  uint8_t* smem_b = smem_a + Stages * kTileABytes;
  uint8_t* staging = smem_b + Stages * kTileBBytes<TileN>;
  auto* full = reinterpret_cast<uint64_t*>(staging + kConsumers * kStagingBytes);
  uint64_t* empty = full + Stages;
  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroup;
  if (threadIdx.x == 0) {
    tma_prefetch_descriptor(&map_a);
    tma_prefetch_descriptor(&map_b);
    if (p.staged_store) tma_prefetch_descriptor(&map_c);
    for (int s = 0; s < Stages; ++s) {
      mbarrier_init(&full[s], 1);                         // the producer's arrive_expect_tx
      mbarrier_init(&empty[s], kConsumers * kWarpgroup);  // every consumer thread
    }
    mbarrier_init_fence();
    fence_proxy_async_shared();
  }
  __syncthreads();
  if (warpgroup == 0) {
    warpgroup_reg_dealloc<kProducerRegs>();
    if (threadIdx.x == 0) produce<AMMajor, BNMajor, TileN>(p, &map_a, &map_b, smem_a, smem_b, full, empty);
  } else {
    warpgroup_reg_alloc<kConsumerRegs>();
    const int consumer = warpgroup - 1;
    consume<In, Out, AMMajor, BNMajor, TileN>(p, &map_c, consumer, smem_a, smem_b,
                                              staging + consumer * kStagingBytes, full, empty);
  }
#endif
}

// The unit for input type In and tile width TileN: the output type and operand layouts of
// the launch pick one of its eight instantiations.
#define HG_HOPPER_KERNEL_UNIT(In, TileN)                                                              \
  template <>                                                                                         \
  void launch_kernel<In, TileN>(const Launch& l) {                                                   \
    const auto go = [&](auto kernel) {                                                                \
      launch(kernel, {.grid = dim3(l.grid), .block = dim3(kThreads), .shared_bytes = kSharedBytes<TileN>, \
                      .stream = l.stream, .name = l.name},                                            \
             l.map_a, l.map_b, l.map_c, l.p);                                                         \
    };                                                                                                \
    const int v = (l.f32_out ? 4 : 0) + (l.a_m_major ? 2 : 0) + (l.b_n_major ? 1 : 0);               \
    switch (v) {                                                                                      \
      case 0: go(hopper_gemm_kernel<In, In, false, false, TileN>); break;                             \
      case 1: go(hopper_gemm_kernel<In, In, false, true, TileN>); break;                              \
      case 2: go(hopper_gemm_kernel<In, In, true, false, TileN>); break;                              \
      case 3: go(hopper_gemm_kernel<In, In, true, true, TileN>); break;                               \
      case 4: go(hopper_gemm_kernel<In, float, false, false, TileN>); break;                          \
      case 5: go(hopper_gemm_kernel<In, float, false, true, TileN>); break;                           \
      case 6: go(hopper_gemm_kernel<In, float, true, false, TileN>); break;                           \
      default: go(hopper_gemm_kernel<In, float, true, true, TileN>); break;                           \
    }                                                                                                 \
  }

}  // namespace hg::cuda::hopper
