// The Hopper (sm_90a) GEMM: TMA loads into a shared-memory ring, wgmma on two consumer
// warpgroups, a persistent grid over output tiles (cuda/hopper_gemm_kernel.h; host side
// cuda/hopper_gemm.cpp). hopper_gemm() runs it when it applies and otherwise returns false,
// so the caller falls back to the mma.sync kernel; the tile walk below is shared with host
// tests.
#pragma once
#include <cstdint>

#include "cuda/primitives/common.h"
#include "framework/dtype.h"

namespace hg::cuda {

// C[z] = epilogue(A[z] · B[z]^T) for z < batches, strides in elements:
//   A[z](m, k) = a[z * batch_stride_a + m * lda + k]   (M x K, row-major, K contiguous)
//             or a[z * batch_stride_a + k * lda + m]   with a_m_major: M contiguous (the
//                                                        transpose of a row-major K x M matrix)
//   B[z](n, k) = b[z * batch_stride_b + n * ldb + k]   (N x K, K contiguous: the "TN" layout;
//                                                        a row-major K x N matrix is its transpose)
//             or b[z * batch_stride_b + k * ldb + n]   with b_n_major: B given as a row-major
//                                                        K x N matrix, N contiguous (the "NN"
//                                                        layout, read by wgmma's transpose mode)
//   C[z](m, n) = c[z * batch_stride_c + m * ldc + n]   (M x N, row-major)
// A and B are both f16 or both bf16; products accumulate in f32; the epilogue computes
// relu?(fma(alpha, acc, bias[n])) in f32 (bias optional, f32/f16/bf16) and rounds once to
// c_dtype (f32, or A and B's dtype). A batch stride of 0 broadcasts that operand over z.
// Runs on device `device`'s current stream, asynchronously.
struct HopperGemm {
  int64_t batches = 1, M = 0, N = 0, K = 0;
  DType ab_dtype = DType::f16;
  const void* a = nullptr;
  int64_t lda = 0, batch_stride_a = 0;
  bool a_m_major = false;
  const void* b = nullptr;
  int64_t ldb = 0, batch_stride_b = 0;
  bool b_n_major = false;
  void* c = nullptr;
  DType c_dtype = DType::f16;
  int64_t ldc = 0, batch_stride_c = 0;
  float alpha = 1.0f;
  const void* bias = nullptr;  // N elements, or nullptr for none
  DType bias_dtype = DType::f32;
  bool relu = false;
  int device = 0;
  // 0: the tile width hopper_tile_n picks (or kernel_settings' forced_hopper_tile_n() when
  // set); 128 or 256 forces it (the self-check runs both widths at any SM count). A 256
  // that N < 256 cannot use falls back to 128.
  int force_tile_n = 0;
};

// Why the kernel does not apply to g (a sentence), or nullptr when it does. It applies when
// the build has the sm_90a kernel and cuda:`device` is an sm_90 GPU (not the emulation),
// the dtypes are as above, TMA's rules hold (a and b 16-byte aligned; lda, ldb and nonzero
// batch strides of A/B multiples of 8 elements), M >= 64, N >= 64, K >= 64, every size
// below 2^31, and the driver provides cuTensorMapEncodeTiled.
const char* hopper_gemm_refusal(const HopperGemm& g);
// Just the device part: nullptr when cuda:`device` can run the kernel.
const char* hopper_gemm_device_refusal(int device);

// Runs the GEMM and returns true, or returns false having done nothing when
// hopper_gemm_refusal(g) is not nullptr. Arguments that are wrong for any GEMM (negative
// sizes, lda < K (M when a_m_major), ldb < K (N when b_n_major), ldc < N, missing pointers)
// raise hg::Error.
// The epilogue stages each output tile in shared memory and stores it with TMA when C allows
// (16-byte aligned, ldc and the batch stride multiples of 16 bytes); otherwise the threads
// store their values directly.
bool hopper_gemm(const HopperGemm& g);

// Output tiles are kHopperTileM x 128 or, for wide products, x 256 (each wgmma is then
// m64n256k16: half the shared-memory reads of A per flop); each CTA of the persistent grid
// takes tiles t = blockIdx.x, blockIdx.x + gridDim.x, ...
inline constexpr int kHopperTileM = 128, kHopperGroupM = 8;

// The tile width for a product on a GPU with `sms` multiprocessors: 256 when N is at least
// 256 and the 128 x 256 tiles still give every multiprocessor one (a persistent grid of
// fewer wide tiles would leave SMs idle that 128 x 128 tiles keep busy), else 128.
HG_HOST_DEVICE int hopper_tile_n(int64_t batches, int64_t M, int64_t N, int sms) {
  const int64_t wide_tiles = batches * ((M + kHopperTileM - 1) / kHopperTileM) * ((N + 255) / 256);
  return N >= 256 && wide_tiles >= sms ? 256 : 128;
}

struct HopperTile {
  int64_t z, tile_m, tile_n;
};

// The t-th output tile in the walk: batch by batch, and inside a batch in bands of
// kHopperGroupM tile rows walked column by column, so the tiles running at the same time
// share a few A row-panels and B column-panels, which stay in L2.
HG_HOST_DEVICE HopperTile hopper_tile(int64_t t, int64_t tiles_m, int64_t tiles_n) {
  const int64_t per_batch = tiles_m * tiles_n, z = t / per_batch, r = t % per_batch;
  const int64_t band = r / (kHopperGroupM * tiles_n), first_m = band * kHopperGroupM;
  const int64_t rows = tiles_m - first_m < kHopperGroupM ? tiles_m - first_m : kHopperGroupM;
  const int64_t in_band = r - band * kHopperGroupM * tiles_n;
  return {z, first_m + in_band % rows, in_band / rows};
}

}  // namespace hg::cuda
