// The Hopper GEMM's host/kernel interface (cuda/hopper_gemm.cpp builds the tensor maps and
// parameters; the kernel, cuda/hopper_gemm_kernel.h, is compiled in four units, one per input
// type and tile width, cuda/hopper_gemm_{f16,bf16}_n{128,256}.cu, so that its 32 variants
// compile in parallel): the tile and stage sizes both sides need, the parameters, the launch.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/cuda_api.h"
#include "cuda/device_types.h"
#if defined(HG_CUDA_EMULATION)
#include "cuda/emu/driver_api.h"
#else
#include <cuda.h>  // CUtensorMap and its enums only: the encoder comes from the runtime
#endif
#include "cuda/hopper_gemm.h"
#include "cuda/stream.h"

namespace hg::cuda::hopper {

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

// One launch: the kernel variant (input type and tile width pick the unit; output type and
// operand layouts the instantiation inside it), its maps and parameters, where it goes.
struct Launch {
  CUtensorMap map_a, map_b, map_c;
  Params p;
  bool a_m_major, b_n_major, f32_out;
  unsigned grid;
  Stream stream;
  const char* name;
};

// Defined by the kernel units for In = half / bfloat16 and TileN = 128 / 256.
template <class In, int TileN>
void launch_kernel(const Launch& l);

#if !defined(HG_CUDA_EMULATION)
// The attributes of one variant's compiled kernel (whether the library has its sm_90a image).
cudaError_t kernel_attributes(cudaFuncAttributes* attr);
#endif

}  // namespace hg::cuda::hopper
