// The Hopper GEMM's host side (cuda/hopper_gemm.h): whether the kernel applies, the tensor
// maps TMA reads and writes through, the tile width and the launch of the variant the
// operands need (the kernel itself: cuda/hopper_gemm_kernel.h and its four units).
#include <algorithm>
#include <array>
#include <mutex>
#include <string>

#include "cuda/hopper_gemm.h"
#include "cuda/hopper_gemm_launch.h"
#include "cuda/kernel_log.h"
#include "cuda/kernel_settings.h"
#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "framework/error.h"

namespace hg::cuda {
namespace hopper {
namespace {

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
// (The 16 names are made once: a launch only indexes the table.)
const char* variant_name(int tile_n, bool a_m_major, bool b_n_major, bool staged_store) {
  static const auto names = [] {
    std::array<const char*, 16> t{};
    for (int i = 0; i < 16; ++i)
      t[i] = kernel_label("hopper_gemm", std::string(i & 8 ? "128x256" : "128x128") +
                                             (i & 4 ? ", A M-major" : ", A K-major") +
                                             (i & 2 ? ", B N-major" : ", B K-major") +
                                             (i & 1 ? ", TMA stores" : ", direct stores"));
    return t;
  }();
  return names[(tile_n == 256 ? 8 : 0) + (a_m_major ? 4 : 0) + (b_n_major ? 2 : 0) + (staged_store ? 1 : 0)];
}

// Builds the maps and launches the variant for g's dtypes, layouts and tile width.
void run(const HopperGemm& g, const Params& p, int sms, int tile_n) {
  Launch l{};
  l.map_a = g.a_m_major ? mn_major_map(g.ab_dtype, g.a, g.M, g.K, g.lda, g.batches, g.batch_stride_a)
                        : k_major_map(g.ab_dtype, g.a, g.M, g.K, g.lda, g.batches, g.batch_stride_a, kHopperTileM);
  l.map_b = g.b_n_major ? mn_major_map(g.ab_dtype, g.b, g.N, g.K, g.ldb, g.batches, g.batch_stride_b)
                        : k_major_map(g.ab_dtype, g.b, g.N, g.K, g.ldb, g.batches, g.batch_stride_b, tile_n);
  if (p.staged_store) l.map_c = output_map(g);
  l.p = p;
  l.a_m_major = g.a_m_major, l.b_n_major = g.b_n_major, l.f32_out = g.c_dtype == DType::f32;
  l.grid = static_cast<unsigned>(std::min<int64_t>(p.tiles, sms));
  l.stream = current_stream(g.device);
  l.name = variant_name(tile_n, g.a_m_major, g.b_n_major, p.staged_store);
  const bool f16 = g.ab_dtype == DType::f16;
  if (tile_n == 256) f16 ? launch_kernel<half, 256>(l) : launch_kernel<bfloat16, 256>(l);
  else f16 ? launch_kernel<half, 128>(l) : launch_kernel<bfloat16, 128>(l);
}

}  // namespace
}  // namespace hopper

using namespace hopper;

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
      fa = kernel_attributes(&attr);
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
  const int forced = g.force_tile_n != 0 ? g.force_tile_n : forced_hopper_tile_n();
  HG_CHECK(forced == 0 || forced == 128 || forced == 256, "hopper_gemm: force_tile_n must be 0, 128 or 256, got ", forced);
  const int tile_n = forced == 0 ? hopper_tile_n(g.batches, g.M, g.N, sms) : forced == 256 && g.N >= 256 ? 256 : 128;
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
  run(g, p, sms, tile_n);
  return true;
}

}  // namespace hg::cuda
