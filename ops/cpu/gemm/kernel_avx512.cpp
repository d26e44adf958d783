// The AVX-512 f32 micro-kernels: a 14x32 register tile (28 zmm accumulators, two B vectors,
// one broadcast) and an 8x48 one (24 accumulators, three B vectors; Intel cores, see
// wide_tile_pays), each element the same sequential chain of fused multiply-adds in k order
// as the AVX2 kernel, so results are bitwise those of the AVX2 path. Compiled for AVX-512
// in a target region (the library stays x86-64-v3) and run only when isa() >= avx512.
#include <cstdint>

#include "ops/cpu/gemm/kernel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HG_GEMM_AVX512 1
#endif

#ifdef HG_GEMM_AVX512
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")

namespace hg::cpu::gemm {
namespace {

// The first V vectors of 16 columns of an MR x NR tile (B panels NR wide); the columns past
// them are the B panel's padding and are left untouched.
template <int MR, int NR, int V>
void tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first) {
  __m512 acc[MR][V];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) acc[i][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + i * ldc + 16 * v);
  for (int64_t k = 0; k < kc; ++k, b += NR) {
    __m512 bv[V];
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * kc + k]);
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(x, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}

// The B panel is 32 columns wide; a half tile computes its first 16.
void avx512_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  const auto* af = static_cast<const float*>(a);
  const auto* bf = static_cast<const float*>(b);
  if (half)
    tile<14, 32, 1>(kc, af, bf, c, ldc, first);
  else
    tile<14, 32, 2>(kc, af, bf, c, ldc, first);
}

// 8 x 48 (24 zmm accumulators, three B vectors, one broadcast): c's first `cols` columns,
// ceil(cols / 16) vectors. In K blocks of 128, its B panel (24 KiB) and A panels share L1.
void avx512_wide_cols(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, int64_t cols) {
  const auto* af = static_cast<const float*>(a);
  const auto* bf = static_cast<const float*>(b);
  if (cols <= 16)
    tile<8, 48, 1>(kc, af, bf, c, ldc, first);
  else if (cols <= 32)
    tile<8, 48, 2>(kc, af, bf, c, ldc, first);
  else
    tile<8, 48, 3>(kc, af, bf, c, ldc, first);
}

void avx512_wide_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  avx512_wide_cols(kc, a, b, c, ldc, first, half ? 24 : 48);
}

}  // namespace
}  // namespace hg::cpu::gemm

#pragma GCC pop_options
#endif

namespace hg::cpu::gemm {

const Kernel<float>& avx512_kernel() {
#ifdef HG_GEMM_AVX512
  static const Kernel<float> k{"avx512 f32 14x32", 14, 32, avx512_fn};
#else
  static const Kernel<float> k = avx2_kernel();
#endif
  return k;
}

const Kernel<float>& avx512_wide_kernel() {
#ifdef HG_GEMM_AVX512
  static const Kernel<float> k = [] {
    Kernel<float> w{"avx512 f32 8x48", 8, 48, avx512_wide_fn};
    w.kc = 128;
    w.fn_cols = avx512_wide_cols;
    return w;
  }();
#else
  static const Kernel<float> k = avx2_kernel();
#endif
  return k;
}

}  // namespace hg::cpu::gemm
