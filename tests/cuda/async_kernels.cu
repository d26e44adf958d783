// Kernels that drive the sm_90 asynchronous units of the emulation (mbarrier rings and phases,
// TMA loads and bulk stores, wgmma groups, named barriers) and misuse them on purpose, for
// tests/cuda/test_async_units.cpp. Emulation only: the native sm_80 test build lacks these.
#include "tests/cuda/async_kernels.h"

#include "cuda/emu/async_ops.h"
#include "cuda/launch.h"
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/mbarrier.h"
#include "cuda/primitives/shared_memory.h"
#include "cuda/primitives/tma.h"
#include "cuda/primitives/wgmma.h"
#include "cuda/primitives/wgmma_desc.h"
#include "tests/cuda/device_buffer.h"

namespace hg::test::kernels {

using cuda::launch;

namespace {

constexpr int kBoxRows = 16, kRowBytes = kTileCols * 2, kBoxBytes = kBoxRows * kRowBytes;
// Room to move a tile up to the 1024-byte alignment of the 128B swizzle pattern.
constexpr size_t kAlignSlack = 1024;

// Byte offset of element (r, c) of a 128B-swizzled tile of 128-byte rows whose base is
// 1024-byte aligned, written out from the ISA's description (the 16-byte chunk index XOR the
// row index mod 8) rather than taken from cuda/primitives/smem_swizzle.h.
HG_HOST_DEVICE uint32_t swizzled(int r, int c) {
  const uint32_t byte = static_cast<uint32_t>(c) * 2;
  return static_cast<uint32_t>(r) * kRowBytes + (((byte / 16) ^ (static_cast<uint32_t>(r) % 8)) * 16) + byte % 16;
}

HG_DEVICE uint8_t* aligned_1024(uint8_t* raw) { return raw + ((1024u - (cuda::smem_address(raw) & 1023u)) & 1023u); }

HG_DEVICE uint16_t& tile_at(uint8_t* tile, int r, int c) { return *reinterpret_cast<uint16_t*>(tile + swizzled(r, c)); }

// ---- mbarrier ----------------------------------------------------------------------------

__global__ void ring_kernel(const uint32_t* values, uint32_t* sums, int stages, int iterations) {
  auto* full = cuda::dynamic_shared_memory<uint64_t>();
  uint64_t* empty = full + stages;
  auto* data = reinterpret_cast<uint32_t*>(empty + stages);
  const unsigned t = threadIdx.x;
  if (t == 0)
    for (int s = 0; s < stages; ++s) {
      cuda::mbarrier_init(&full[s], 32);   // every producer lane
      cuda::mbarrier_init(&empty[s], 64);  // every consumer thread
    }
  __syncthreads();
  uint32_t sum = 0;
  for (int it = 0; it < iterations; ++it) {
    const int s = it % stages;
    const auto parity = static_cast<uint32_t>(it / stages) & 1;
    uint32_t* stage = data + s * 64;
    if (t < 32) {
      cuda::mbarrier_wait(&empty[s], parity ^ 1);  // the first pass finds fresh barriers: no wait
      stage[t] = values[it * 64 + t];
      stage[t + 32] = values[it * 64 + t + 32];
      cuda::mbarrier_arrive(&full[s]);
    } else {
      cuda::mbarrier_wait(&full[s], parity);
      sum += stage[t - 32];
      cuda::mbarrier_arrive(&empty[s]);
    }
  }
  if (t >= 32) sums[t - 32] = sum;
}

// Whether the 16 x 64 tile in shared memory holds rows row0.. of the 64-column global tensor.
HG_DEVICE uint32_t tile_matches(uint8_t* tile, const uint16_t* global, int row0) {
  for (int r = 0; r < kBoxRows; ++r)
    for (int c = 0; c < kTileCols; ++c)
      if (tile_at(tile, r, c) != global[(row0 + r) * kTileCols + c]) return 0;
  return 1;
}

// The TMA kernels' shared memory: a 16-row tile at 1024-byte alignment, its mbarrier after
// it, initialised by thread 0 for `count` arrivals (the caller syncs before others use it).
struct TileAndBarrier {
  uint8_t* tile;
  uint64_t* bar;
};
HG_DEVICE TileAndBarrier tile_and_barrier(uint32_t count) {
  uint8_t* tile = aligned_1024(cuda::dynamic_shared_memory<uint8_t>());
  auto* bar = reinterpret_cast<uint64_t*>(tile + kBoxBytes);
  if (threadIdx.x == 0) {
    cuda::mbarrier_init(bar, count);
    cuda::mbarrier_init_fence();
  }
  return {tile, bar};
}

__global__ void phases_kernel(const __grid_constant__ CUtensorMap map, const uint16_t* global, uint32_t* flags) {
  const auto [tile, bar] = tile_and_barrier(2);
  const unsigned t = threadIdx.x;
  if (t == 0) {
    flags[0] = cuda::emu::mbarrier_test_parity(bar, 1);  // a fresh barrier: "phase -1" is done
    flags[1] = cuda::emu::mbarrier_test_parity(bar, 0);
    cuda::mbarrier_wait(bar, 1);  // must return at once: nobody has arrived yet
    cuda::mbarrier_arrive_expect_tx(bar, kBoxBytes);
  }
  __syncthreads();
  if (t == 32) cuda::mbarrier_arrive(bar);  // both arrivals are in; the bytes are not
  __syncthreads();
  if (t == 0) {
    flags[2] = cuda::emu::mbarrier_test_parity(bar, 0);
    cuda::tma_load_2d(tile, &map, bar, 0, 0);
  }
  cuda::mbarrier_wait(bar, 0);
  if (t == 0) flags[3] = tile_matches(tile, global, 0);
  __syncthreads();
  // Phase 1: the bytes land first (after many scheduling rounds), the second arrival later.
  if (t == 0) {
    cuda::mbarrier_arrive_expect_tx(bar, kBoxBytes);
    cuda::tma_load_2d(tile, &map, bar, 0, kBoxRows);
  }
  for (int i = 0; i < 64; ++i) __syncthreads();
  if (t == 0) {
    flags[4] = tile_matches(tile, global, kBoxRows);
    flags[5] = cuda::emu::mbarrier_test_parity(bar, 1);
  }
  __syncthreads();
  if (t == 32) cuda::mbarrier_arrive(bar);
  cuda::mbarrier_wait(bar, 1);
  if (t == 0) flags[6] = cuda::emu::mbarrier_test_parity(bar, 1) && !cuda::emu::mbarrier_test_parity(bar, 0);
}

__global__ void mbarrier_misuse_kernel(MbarrierMisuse kind) {
  __shared__ uint64_t static_bar;
  uint8_t* raw = cuda::dynamic_shared_memory<uint8_t>();
  auto* bar = reinterpret_cast<uint64_t*>(raw);
  const unsigned t = threadIdx.x;
  switch (kind) {
    case MbarrierMisuse::uninitialised:
      if (t == 0) cuda::mbarrier_arrive(bar);  // shared memory starts as 0xff bytes
      break;
    case MbarrierMisuse::extra_arrival:  // the phase waits for bytes, so the second arrival is extra
      if (t == 0) {
        cuda::mbarrier_init(bar, 1);
        cuda::mbarrier_arrive_expect_tx(bar, 128);
      }
      __syncthreads();
      if (t == 32) cuda::mbarrier_arrive(bar);
      break;
    case MbarrierMisuse::never_completes:
      if (t == 0) cuda::mbarrier_init(bar, 2);
      __syncthreads();
      if (t == 0) cuda::mbarrier_arrive(bar);
      cuda::mbarrier_wait(bar, 0);
      break;
    case MbarrierMisuse::outside_dynamic:
      if (t == 0) cuda::mbarrier_init(&static_bar, 1);
      break;
    case MbarrierMisuse::misaligned:
      if (t == 0) cuda::mbarrier_init(reinterpret_cast<uint64_t*>(raw + 4), 1);
      break;
  }
}

// ---- TMA ---------------------------------------------------------------------------------

__global__ void tma_load_kernel(const __grid_constant__ CUtensorMap map, int row0, uint16_t* before, uint16_t* after) {
  const auto [tile, bar] = tile_and_barrier(1);
  const unsigned t = threadIdx.x;
  __syncthreads();
  if (t == 0) {
    cuda::mbarrier_arrive_expect_tx(bar, kBoxBytes);
    cuda::tma_load_2d(tile, &map, bar, 0, row0);
    for (int i = 0; i < kBoxRows * kTileCols; ++i) before[i] = tile_at(tile, i / kTileCols, i % kTileCols);
  }
  cuda::mbarrier_wait(bar, 0);
  for (int i = static_cast<int>(t); i < kBoxRows * kTileCols; i += static_cast<int>(blockDim.x))
    after[i] = tile_at(tile, i / kTileCols, i % kTileCols);
}

__global__ void tma_store_kernel(const __grid_constant__ CUtensorMap map, const uint16_t* src, int col0, int row0) {
  uint8_t* tile = aligned_1024(cuda::dynamic_shared_memory<uint8_t>());
  const unsigned t = threadIdx.x;
  for (int i = static_cast<int>(t); i < kBoxRows * kTileCols; i += static_cast<int>(blockDim.x))
    tile_at(tile, i / kTileCols, i % kTileCols) = src[i];
  cuda::fence_proxy_async_shared();
  __syncthreads();
  if (t == 0) {
    cuda::tma_store_3d(&map, tile, col0, row0, 0);
    cuda::tma_store_commit();
    cuda::tma_store_wait_read<0>();
    // The store has read its source: reusing the buffer must not change what it wrote.
    for (int i = 0; i < kBoxBytes; ++i) tile[i] = 0x5a;
  }
}

// ---- wgmma -------------------------------------------------------------------------------

constexpr int kM = 64, kN = 128, kK = 64;

// Thread slot's accumulator d[j] is D[row][col] of the m64nNk16 f32 fragment (cuda/primitives/wgmma.h).
HG_DEVICE void store_fragment(const float* d, unsigned slot, float* out) {
  const unsigned w = slot / 32, l = slot % 32;
  for (int j = 0; j < kN / 8; ++j)
    for (int i = 0; i < 4; ++i) {
      const unsigned row = 16 * w + l / 4 + 8 * (i / 2), col = 8 * j + 2 * (l % 4) + i % 2;
      out[row * kN + col] = d[4 * j + i];
    }
}

template <bool Bf16>
HG_DEVICE void wgmma(float (&d)[64], uint64_t a_desc, uint64_t b_desc) {
  cuda::wgmma_m64k16<128, Bf16 ? cuda::WgmmaAB::bf16 : cuda::WgmmaAB::f16, false, false>(d, a_desc, b_desc, true);
}

// A and B to shared memory, K-major with the 128B swizzle (each 128-byte row is one M or N
// row's 64 K elements), visible to the async proxy and every thread on return.
HG_DEVICE void stage_operands(const uint16_t* a, const uint16_t* b, uint8_t* smem_a, uint8_t* smem_b) {
  for (int i = static_cast<int>(threadIdx.x); i < kN * kK; i += static_cast<int>(blockDim.x)) {
    if (i < kM * kK) tile_at(smem_a, i / kK, i % kK) = a[i];
    tile_at(smem_b, i / kK, i % kK) = b[i];
  }
  cuda::fence_proxy_async_shared();
  __syncthreads();
}

template <bool Bf16>
__global__ void wgmma_kernel(const uint16_t* a, const uint16_t* b, float init, float* out) {
  uint8_t* smem_a = aligned_1024(cuda::dynamic_shared_memory<uint8_t>());
  uint8_t* smem_b = smem_a + kM * kRowBytes;
  stage_operands(a, b, smem_a, smem_b);
  const uint32_t addr_a = cuda::smem_address(smem_a), addr_b = cuda::smem_address(smem_b);
  const auto desc = [](uint32_t addr, int k) { return cuda::wgmma_kmajor_sw128_descriptor(addr, k); };
  float acc1[64], acc2[64];
  for (int i = 0; i < 64; ++i) acc1[i] = acc2[i] = init;
  const unsigned slot = threadIdx.x;
  constexpr int kMatrix = kM * kN;
  cuda::wgmma_fence();
  wgmma<Bf16>(acc1, desc(addr_a, 0), desc(addr_b, 0));
  wgmma<Bf16>(acc1, desc(addr_a, 1), desc(addr_b, 1));
  cuda::wgmma_commit();
  store_fragment(acc1, slot, out);
  wgmma<Bf16>(acc2, desc(addr_a, 2), desc(addr_b, 2));
  wgmma<Bf16>(acc2, desc(addr_a, 3), desc(addr_b, 3));
  cuda::wgmma_commit();
  // The barriers keep every thread's reads between the same two waits: a group runs for the
  // whole warpgroup when its first thread reaches a wait that retires it.
  __syncthreads();
  cuda::wgmma_wait<1>();
  store_fragment(acc1, slot, out + kMatrix);
  store_fragment(acc2, slot, out + 2 * kMatrix);
  __syncthreads();
  cuda::wgmma_wait<0>();
  store_fragment(acc2, slot, out + 3 * kMatrix);
}

__global__ void wgmma_misuse_kernel(WgmmaMisuse kind) {
  uint8_t* smem = aligned_1024(cuda::dynamic_shared_memory<uint8_t>());
  const uint32_t addr = cuda::smem_address(smem);
  // Thread 5 names another k slice of B: the warpgroup's threads disagree on the instruction.
  const int b_slice = kind == WgmmaMisuse::divergent_descriptor && threadIdx.x == 5 ? 1 : 0;
  float acc[64] = {};
  cuda::wgmma_m64k16<128, cuda::WgmmaAB::f16, false, false>(acc, cuda::wgmma_kmajor_sw128_descriptor(addr, 0),
                                                     cuda::wgmma_kmajor_sw128_descriptor(addr + kM * kRowBytes, b_slice),
                                                     false);
  cuda::wgmma_commit();
  cuda::wgmma_wait<0>();
}

// ---- named barriers ----------------------------------------------------------------------

__global__ void named_exchange_kernel(int rounds, uint32_t* sums) {
  __shared__ uint32_t words[256];
  const unsigned t = threadIdx.x, group = t / 128, neighbour = group * 128 + (t % 128 + 1) % 128;
  uint32_t sum = 0;
  for (int r = 0; r < rounds; ++r) {
    words[t] = t * 7 + static_cast<uint32_t>(r) * 1000 + group * 100000;
    cuda::named_barrier_sync(1 + group, 128);
    sum += words[neighbour];
    cuda::named_barrier_sync(1 + group, 128);  // nobody overwrites a word before it was read
  }
  sums[t] = sum;
}

__global__ void named_misuse_kernel(unsigned id, unsigned count) { cuda::named_barrier_sync(id, count); }

// ---- host side ---------------------------------------------------------------------------

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// A `cols` x `rows` (x 1) tensor of 16-bit elements with a row pitch of 64 elements, 16 x 64
// boxes, 128B swizzle, encoded through the runtime's driver entry point as cuda/hopper_gemm.cpp does.
CUtensorMap tile_map(void* global, int rank, int cols, int rows) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  HG_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
  HG_CHECK(found == cudaDriverEntryPointSuccess && fn, "cuTensorMapEncodeTiled is not available");
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows), 1};
  const cuuint64_t strides[2] = {kRowBytes, static_cast<cuuint64_t>(kRowBytes) * static_cast<cuuint64_t>(rows)};
  const cuuint32_t box[3] = {kTileCols, kBoxRows, 1}, element_strides[3] = {1, 1, 1};
  const CUresult r = reinterpret_cast<EncodeTiled>(fn)(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, static_cast<cuuint32_t>(rank), global, dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  HG_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed with CUresult ", static_cast<int>(r));
  return map;
}

constexpr size_t kTileShared = kAlignSlack + kBoxBytes + sizeof(uint64_t);

}  // namespace

std::vector<uint32_t> mbarrier_ring(const std::vector<uint32_t>& values, int stages, int iterations) {
  HG_CHECK(values.size() == static_cast<size_t>(iterations) * 64, "mbarrier_ring: 64 values per iteration");
  DeviceBuffer<uint32_t> in(values), sums(64);
  const size_t shared = static_cast<size_t>(stages) * (2 * sizeof(uint64_t) + 64 * sizeof(uint32_t));
  launch(ring_kernel, {.grid = 1, .block = 96, .shared_bytes = shared, .name = "ring_kernel"}, in.get(), sums.get(),
         stages, iterations);
  return sums.read();
}

std::vector<uint32_t> mbarrier_phases(const std::vector<uint16_t>& global) {
  DeviceBuffer<uint16_t> g(global);
  DeviceBuffer<uint32_t> flags(std::vector<uint32_t>(7, 99));
  const CUtensorMap map = tile_map(g.get(), 2, kTileCols, static_cast<int>(global.size()) / kTileCols);
  launch(phases_kernel, {.grid = 1, .block = 64, .shared_bytes = kTileShared, .name = "phases_kernel"}, map, g.get(),
         flags.get());
  return flags.read();
}

void mbarrier_misuse(MbarrierMisuse kind) {
  launch(mbarrier_misuse_kernel, {.grid = 1, .block = 64, .shared_bytes = 64, .name = "mbarrier_misuse_kernel"}, kind);
}

TmaLoadSeen tma_load_seen(const std::vector<uint16_t>& global, int rows, int row0) {
  DeviceBuffer<uint16_t> g(global), before(kBoxRows * kTileCols), after(kBoxRows * kTileCols);
  const CUtensorMap map = tile_map(g.get(), 2, kTileCols, rows);
  launch(tma_load_kernel, {.grid = 1, .block = 64, .shared_bytes = kTileShared, .name = "tma_load_kernel"}, map, row0,
         before.get(), after.get());
  return {before.read(), after.read()};
}

std::vector<uint16_t> tma_store(const std::vector<uint16_t>& tile, std::vector<uint16_t> global, int cols, int rows,
                                int col0, int row0) {
  DeviceBuffer<uint16_t> src(tile), g(global);
  const CUtensorMap map = tile_map(g.get(), 3, cols, rows);
  launch(tma_store_kernel, {.grid = 1, .block = 128, .shared_bytes = kTileShared, .name = "tma_store_kernel"}, map,
         src.get(), col0, row0);
  return g.read();
}

WgmmaSeen wgmma_two_groups(bool bf16, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, float init) {
  DeviceBuffer<uint16_t> da(a), db(b);
  DeviceBuffer<float> out(4 * kM * kN);
  const cuda::LaunchConfig cfg{.grid = 1, .block = 128, .shared_bytes = kAlignSlack + (kM + kN) * kRowBytes,
                               .name = "wgmma_kernel"};
  if (bf16) launch(wgmma_kernel<true>, cfg, da.get(), db.get(), init, out.get());
  else launch(wgmma_kernel<false>, cfg, da.get(), db.get(), init, out.get());
  const std::vector<float> all = out.read();
  const auto part = [&](int i) { return std::vector<float>(all.begin() + i * kM * kN, all.begin() + (i + 1) * kM * kN); };
  return {part(0), part(1), part(2), part(3)};
}

void wgmma_misuse(WgmmaMisuse kind) {
  const unsigned threads = kind == WgmmaMisuse::partial_warpgroup ? 96 : 128;
  launch(wgmma_misuse_kernel,
         {.grid = 1, .block = threads, .shared_bytes = kAlignSlack + (kM + kN) * kRowBytes, .name = "wgmma_misuse_kernel"},
         kind);
}

std::vector<uint32_t> named_barrier_exchange(int rounds) {
  DeviceBuffer<uint32_t> sums(256);
  launch(named_exchange_kernel, {.grid = 1, .block = 256, .name = "named_exchange_kernel"}, rounds, sums.get());
  return sums.read();
}

void named_barrier_misuse(unsigned id, unsigned count) {
  launch(named_misuse_kernel, {.grid = 1, .block = 128, .name = "named_misuse_kernel"}, id, count);
}

}  // namespace hg::test::kernels
