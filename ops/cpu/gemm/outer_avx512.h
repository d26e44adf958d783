// The AVX-512 outer-product register tile, shared by the outer-product driver's kernels
// (kernel_outer.cpp: both panels packed k-major) and the direct weight gradient
// (conv2d_direct_avx512.cpp: taps read from the padded image, filters from gy): c[i, 16v + j]
// (i < MR rows, V vectors of 16 columns, row stride ldc) = (first ? 0 : c) + the sum over
// `rows` runs of kc steps of a[i] * b[16v + j], a advancing by a_step per step and by
// a_row_step from one run's start to the next's, b by b_step per step throughout. Each element
// is one chain of fused multiply-adds in order. Include it only inside a region compiled for
// AVX-512 F (`#pragma GCC target`), as both users do. Internal, not installed.
#pragma once
#include <cstdint>

#include <immintrin.h>

namespace hg::cpu::gemm {

template <int MR, int V>
inline void outer_avx512(int64_t rows, int64_t kc, const float* a, int64_t a_step, int64_t a_row_step, const float* b,
                         int64_t b_step, float* c, int64_t ldc, bool first) {
  __m512 acc[MR][V];
#pragma GCC unroll 24
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + i * ldc + 16 * v);
  for (int64_t row = 0; row < rows; ++row, a += a_row_step - kc * a_step)
    for (int64_t k = 0; k < kc; ++k, a += a_step, b += b_step) {
      __m512 bv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 24
      for (int i = 0; i < MR; ++i) {
        const __m512 x = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(x, bv[v], acc[i][v]);
      }
    }
#pragma GCC unroll 24
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}

}  // namespace hg::cpu::gemm
