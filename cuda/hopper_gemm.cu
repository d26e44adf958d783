// The Hopper GEMM kernel (sm_90a): one producer warpgroup streams A and B tiles with TMA
// into a ring of shared-memory stages (mbarriers full/empty), two consumer warpgroups
// multiply them with wgmma and write the epilogue from registers; persistent CTAs walk the
// output tiles in hopper_tile()'s L2-friendly order. Contract and fallbacks: hopper_gemm.h.
// claims: wgmma
#if defined(HG_CUDA_EMULATION)
#include "cuda/emu/driver_api.h"
#else
#include <cuda.h>  // CUtensorMap and its enums only: the encoder comes from the runtime
#endif

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <type_traits>

#include "cuda/device_types.h"
#include "cuda/hopper_gemm.h"
#include "cuda/kernel_log.h"
#include "cuda/launch.h"
#include "cuda/primitives/shared_memory.h"
#include "framework/error.h"

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

namespace hg::cuda {
namespace {

// A stage holds a 128 x 64 tile of A and a TileN x 64 tile of B (TileN = 128 or 256). A
// K-contiguous operand's rows (M or N) are 64 16-bit K-elements = 128 bytes, exactly one row
// of the 128-byte swizzle TMA writes and wgmma reads; an MN-contiguous one (a_m_major,
// b_n_major) is stored as boxes of 64 K-rows x 64 M- or N-elements (128 bytes), which wgmma
// reads MN-major. Either way, consumer c's 64 rows of A are the 8 KiB at 8192 c. Behind the stages, each consumer warpgroup has a
// 16 KiB staging buffer through which its 64 x TileN part of the output goes to the TMA store
// in chunks (two boxes of 64 rows x 128 bytes, 128B-swizzled): 6 stages of 32 KiB for 128-wide
// tiles, 4 of 48 KiB for 256-wide ones, within the 227 KiB an sm_90 block may use.
constexpr int kTileK = 64;
constexpr int kTileABytes = kHopperTileM * kTileK * 2;
template <int TileN>
constexpr int kTileBBytes = TileN * kTileK * 2;
template <int TileN>
constexpr int kStageBytes = kTileABytes + kTileBBytes<TileN>;
template <int TileN>
constexpr int kStages = TileN == 128 ? 6 : 4;
constexpr int kBoxBytes = 64 * 128;           // a 64-row box of 128-byte rows: the unit TMA moves here
constexpr int kStagingBytes = 2 * kBoxBytes;  // per consumer
constexpr int kConsumers = 2, kWarpgroup = 128, kThreads = (1 + kConsumers) * kWarpgroup;
// 1024: the swizzle pattern repeats every 8 rows of 128 bytes, and TMA and the descriptors
// assume a tile starts at that alignment; dynamic shared memory is only 16-byte aligned.
template <int TileN>
constexpr size_t kSharedBytes = 1024 + size_t{kStages<TileN>} * kStageBytes<TileN> + kConsumers * kStagingBytes +
                                2 * kStages<TileN> * sizeof(uint64_t);
static_assert(kSharedBytes<128> <= 227 * 1024 && kSharedBytes<256> <= 227 * 1024);

enum class BiasKind : int { none, f32, f16, bf16 };

struct Params {
  int64_t M, N, K, tiles_m, tiles_n, tiles;
  bool a_batched, b_batched;
  void* c;
  int64_t ldc, batch_stride_c;
  bool staged_store;  // C takes TMA stores (map_c is valid); otherwise direct stores
  bool pair_stores;   // direct stores: c, ldc and batch_stride_c allow 2-element stores
  float alpha;
  const void* bias;
  BiasKind bias_kind;
  bool relu;
};

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

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver the runtime loaded (the library does not link
// libcuda, so it still loads where there is no driver); nullptr when unavailable.
EncodeTiled encode_tiled() {
  static EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return EncodeTiled{nullptr};
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// A 3-D tensor map with 128-byte swizzle: dims innermost first, strides (bytes) of dims 1 and
// 2, a box whose inner extent is 128 bytes (the swizzle span, which the driver requires the
// inner extent not to exceed; the kernel's tiles are made of such rows).
CUtensorMap tensor_map(DType dt, const void* p, const cuuint64_t (&dims)[3], const cuuint64_t (&strides)[2],
                       const cuuint32_t (&box)[3], const char* what) {
  CUtensorMap map{};
  const CUtensorMapDataType type = dt == DType::f16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                   : dt == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = encode_tiled()(&map, type, 3, const_cast<void*>(p), dims, strides, box, element_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  HG_CHECK(r == CUDA_SUCCESS, "hopper_gemm: cuTensorMapEncodeTiled failed with CUresult ", static_cast<int>(r), " for ",
           what, " (dims ", dims[0], " x ", dims[1], " x ", dims[2], ", strides ", strides[0], " and ", strides[1],
           " bytes)");
  return map;
}

// An operand's batch dimension: one batch (coordinate 0) when it is broadcast.
struct BatchDim {
  cuuint64_t count, stride_bytes;
};
BatchDim batch_dim(int64_t batches, int64_t batch_stride, int64_t matrix_elements, int64_t element_bytes) {
  const bool batched = batch_stride != 0 && batches > 1;
  return {static_cast<cuuint64_t>(batched ? batches : 1),
          static_cast<cuuint64_t>((batched ? batch_stride : matrix_elements) * element_bytes)};
}

// A [batches, rows, K] operand, K contiguous: boxes of 64 K-elements x box_rows rows.
CUtensorMap k_major_map(DType dt, const void* p, int64_t rows, int64_t K, int64_t ld, int64_t batches,
                        int64_t batch_stride, int box_rows) {
  const BatchDim z = batch_dim(batches, batch_stride, ld * rows, 2);
  return tensor_map(dt, p, {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows), z.count},
                    {static_cast<cuuint64_t>(ld) * 2, z.stride_bytes}, {kTileK, static_cast<cuuint32_t>(box_rows), 1},
                    "a K-major operand");
}

// An operand as [batches, K, rows], rows contiguous (A M-major, B N-major): boxes of 64
// row-elements x 64 K-rows.
CUtensorMap mn_major_map(DType dt, const void* p, int64_t rows, int64_t K, int64_t ld, int64_t batches,
                         int64_t batch_stride) {
  const BatchDim z = batch_dim(batches, batch_stride, ld * K, 2);
  return tensor_map(dt, p, {static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(K), z.count},
                    {static_cast<cuuint64_t>(ld) * 2, z.stride_bytes}, {64, kTileK, 1}, "an MN-major operand");
}

// C as [batches, M, N]: boxes of 128 bytes of a row (64 16-bit or 32 f32 values) x 64 rows,
// one consumer warpgroup's rows.
CUtensorMap output_map(const HopperGemm& g) {
  const auto es = static_cast<int64_t>(dtype_size(g.c_dtype));
  const BatchDim z = batch_dim(g.batches, g.batch_stride_c, g.ldc * g.M, es);
  return tensor_map(g.c_dtype, g.c, {static_cast<cuuint64_t>(g.N), static_cast<cuuint64_t>(g.M), z.count},
                    {static_cast<cuuint64_t>(g.ldc * es), z.stride_bytes},
                    {static_cast<cuuint32_t>(128 / es), 64, 1}, "C");
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether TMA can store C: 16-byte aligned, row and batch strides whole multiples of 16
// bytes, every batch its own matrix.
bool output_storable(const HopperGemm& g) {
  const auto es = static_cast<int64_t>(dtype_size(g.c_dtype));
  const bool batches_ok = g.batches == 1 || (g.batch_stride_c > 0 && g.batch_stride_c * es % 16 == 0);
  return aligned16(g.c) && g.ldc * es % 16 == 0 && batches_ok;
}

// The kernel's name in the kernel log: the tile, how A and B are read, how C is written.
const char* variant_name(int tile_n, bool a_m_major, bool b_n_major, bool staged_store) {
  return kernel_label("hopper_gemm", std::string(tile_n == 256 ? "128x256" : "128x128") +
                                         (a_m_major ? ", A M-major" : ", A K-major") +
                                         (b_n_major ? ", B N-major" : ", B K-major") +
                                         (staged_store ? ", TMA stores" : ", direct stores"));
}

template <class In, class Out, bool AMMajor, bool BNMajor, int TileN>
void run(const HopperGemm& g, const Params& p, int sms) {
  const CUtensorMap map_a = AMMajor ? mn_major_map(g.ab_dtype, g.a, g.M, g.K, g.lda, g.batches, g.batch_stride_a)
                                    : k_major_map(g.ab_dtype, g.a, g.M, g.K, g.lda, g.batches, g.batch_stride_a,
                                                  kHopperTileM);
  const CUtensorMap map_b = BNMajor ? mn_major_map(g.ab_dtype, g.b, g.N, g.K, g.ldb, g.batches, g.batch_stride_b)
                                    : k_major_map(g.ab_dtype, g.b, g.N, g.K, g.ldb, g.batches, g.batch_stride_b, TileN);
  const CUtensorMap map_c = p.staged_store ? output_map(g) : CUtensorMap{};
  const auto grid = static_cast<unsigned>(std::min<int64_t>(p.tiles, sms));
  launch(hopper_gemm_kernel<In, Out, AMMajor, BNMajor, TileN>,
         {.grid = dim3(grid), .block = dim3(kThreads), .shared_bytes = kSharedBytes<TileN>,
          .stream = current_stream(g.device), .name = variant_name(TileN, AMMajor, BNMajor, p.staged_store)},
         map_a, map_b, map_c, p);
}

// The kernel variant for g's layouts and tile width (one instantiation per combination).
template <class In, class Out, bool AMMajor, bool BNMajor>
void run_for_tile(const HopperGemm& g, const Params& p, int sms, int tile_n) {
  if (tile_n == 256) run<In, Out, AMMajor, BNMajor, 256>(g, p, sms);
  else run<In, Out, AMMajor, BNMajor, 128>(g, p, sms);
}

template <class In, class Out, bool AMMajor>
void run_for_b(const HopperGemm& g, const Params& p, int sms, int tile_n) {
  if (g.b_n_major) run_for_tile<In, Out, AMMajor, true>(g, p, sms, tile_n);
  else run_for_tile<In, Out, AMMajor, false>(g, p, sms, tile_n);
}

template <class In, class Out>
void run_for_a(const HopperGemm& g, const Params& p, int sms, int tile_n) {
  if (g.a_m_major) run_for_b<In, Out, true>(g, p, sms, tile_n);
  else run_for_b<In, Out, false>(g, p, sms, tile_n);
}

template <class In>
void run_for_output(const HopperGemm& g, const Params& p, int sms, int tile_n) {
  if (g.c_dtype == DType::f32) run_for_a<In, float>(g, p, sms, tile_n);
  else run_for_a<In, In>(g, p, sms, tile_n);
}

}  // namespace

const char* hopper_gemm_device_refusal(int device) {
  static std::mutex mu;
  static const char* verdict[64];
  static bool known[64] = {};
  if (device < 0 || device >= 64 || device >= device_count()) return "the device does not exist";
#if defined(HG_CUDA_EMULATION)
  (void)mu;
  (void)verdict;
  (void)known;
  cudaDeviceProp prop{};
  HG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.major == 9 ? nullptr : "the emulated device is an sm_80 model (HG_EMU_CC=9.0 emulates an sm_90)";
#else
  std::lock_guard<std::mutex> lock(mu);
  if (!known[device]) {
    cudaDeviceProp prop{};
    cudaFuncAttributes attr{};
    HG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    cudaError_t fa;
    {
      const DeviceGuard guard(device);  // the image is looked up on the current device
      fa = cudaFuncGetAttributes(&attr, hopper_gemm_kernel<half, float, false, false, 128>);
    }
    if (fa != cudaSuccess) cudaGetLastError();
    verdict[device] = prop.major != 9 || prop.minor != 0 ? "the device is not sm_90 (Hopper)"
                      : fa != cudaSuccess || attr.binaryVersion != 90
                          ? "the library has no sm_90a image of the kernel for this device"
                      : encode_tiled() == nullptr ? "the driver does not provide cuTensorMapEncodeTiled"
                                                  : nullptr;
    known[device] = true;
  }
  return verdict[device];
#endif
}

const char* hopper_gemm_refusal(const HopperGemm& g) {
  const auto two_byte = [](DType d) { return d == DType::f16 || d == DType::bf16; };
  if (!two_byte(g.ab_dtype)) return "A and B must be f16 or bf16";
  if (g.c_dtype != g.ab_dtype && g.c_dtype != DType::f32) return "C must be f32 or A and B's dtype";
  if (g.bias && !two_byte(g.bias_dtype) && g.bias_dtype != DType::f32) return "the bias must be f16, bf16 or f32";
  if (g.M < 64 || g.N < 64 || g.K < 64) return "M, N and K must be at least 64 (smaller products: mma.sync)";
  constexpr int64_t kMax = int64_t{1} << 31;
  if (g.M >= kMax || g.N >= kMax || g.K >= kMax || g.batches >= kMax) return "sizes must be below 2^31";
  if (!aligned16(g.a) || !aligned16(g.b)) return "TMA needs A and B 16-byte aligned";
  if (g.lda % 8 || g.ldb % 8 || g.batch_stride_a % 8 || g.batch_stride_b % 8)
    return "TMA needs lda, ldb and the batch strides of A and B to be multiples of 8 elements (16 bytes)";
  return hopper_gemm_device_refusal(g.device);
}

bool hopper_gemm(const HopperGemm& g) {
  HG_CHECK(g.batches >= 0 && g.M >= 0 && g.N >= 0 && g.K >= 0, "hopper_gemm: sizes must be >= 0, got batches ",
           g.batches, ", M ", g.M, ", N ", g.N, ", K ", g.K);
  HG_CHECK(g.lda >= (g.a_m_major ? g.M : g.K) && g.ldb >= (g.b_n_major ? g.N : g.K) && g.ldc >= g.N,
           "hopper_gemm: need lda >= ", g.a_m_major ? "M (A M-major)" : "K", ", ldb >= ",
           g.b_n_major ? "N (B N-major)" : "K", " and ldc >= N, got lda ", g.lda, ", ldb ", g.ldb, ", ldc ", g.ldc,
           " for M ", g.M, ", K ", g.K, ", N ", g.N);
  HG_CHECK(g.batch_stride_a >= 0 && g.batch_stride_b >= 0 && g.batch_stride_c >= 0,
           "hopper_gemm: batch strides must be >= 0");
  HG_CHECK(g.batches == 0 || g.M == 0 || g.N == 0 || (g.a && g.b && g.c),
           "hopper_gemm: A, B and C must be given (non-null) for a non-empty product");
  if (g.batches == 0 || hopper_gemm_refusal(g) != nullptr) return false;
  int sms = 0;
  HG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g.device));
  const int tile_n = hopper_tile_n(g.batches, g.M, g.N, sms);
  const int64_t tiles_m = (g.M + kHopperTileM - 1) / kHopperTileM, tiles_n = (g.N + tile_n - 1) / tile_n;
  const size_t out_pair = 2 * dtype_size(g.c_dtype);
  const Params p{.M = g.M, .N = g.N, .K = g.K, .tiles_m = tiles_m, .tiles_n = tiles_n,
                 .tiles = g.batches * tiles_m * tiles_n, .a_batched = g.batch_stride_a != 0,
                 .b_batched = g.batch_stride_b != 0, .c = g.c, .ldc = g.ldc, .batch_stride_c = g.batch_stride_c,
                 .staged_store = output_storable(g),
                 .pair_stores = reinterpret_cast<uintptr_t>(g.c) % out_pair == 0 && g.ldc % 2 == 0 &&
                                g.batch_stride_c % 2 == 0,
                 .alpha = g.alpha, .bias = g.bias,
                 .bias_kind = !g.bias                        ? BiasKind::none
                              : g.bias_dtype == DType::f32 ? BiasKind::f32
                              : g.bias_dtype == DType::f16 ? BiasKind::f16
                                                           : BiasKind::bf16,
                 .relu = g.relu};
  if (g.ab_dtype == DType::f16) run_for_output<half>(g, p, sms, tile_n);
  else run_for_output<bfloat16>(g, p, sms, tile_n);
  return true;
}

}  // namespace hg::cuda
