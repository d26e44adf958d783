// The AVX2 outer-product register tile, shared by the outer-product driver's kernels
// (kernel_outer.cpp: both panels packed k-major) and the direct weight gradient
// (conv2d_direct.cpp: taps read from the padded image, filters from gy): c[i, 8v + j] (i < MR
// rows, V vectors of 8 columns, row stride ldc) = (first ? 0 : c) + sum over k < kc of
// a[i] * b[8v + j], with a advancing by a_step and b by b_step per k. Each element is one
// chain of fused multiply-adds in k order. Internal, not installed.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace hg::cpu::gemm {

template <int MR, int V>
inline void outer_avx2(int64_t kc, const float* a, int64_t a_step, const float* b, int64_t b_step, float* c,
                       int64_t ldc, bool first) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc[MR][V];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) acc[i][v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + i * ldc + 8 * v);
  for (int64_t k = 0; k < kc; ++k, a += a_step, b += b_step) {
    __m256 bv[V];
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) bv[v] = _mm256_loadu_ps(b + 8 * v);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(x, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(c + i * ldc + 8 * v, acc[i][v]);
#else
  float acc[MR][8 * V];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 8 * V; ++j) acc[i][j] = first ? 0.0f : c[i * ldc + j];
  for (int64_t k = 0; k < kc; ++k, a += a_step, b += b_step)
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < 8 * V; ++j) acc[i][j] = std::fma(a[i], b[j], acc[i][j]);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 8 * V; ++j) c[i * ldc + j] = acc[i][j];
#endif
}

}  // namespace hg::cpu::gemm
