// The engine's non-template parts: the AVX2 micro-kernel (portable fused multiply-adds
// where the build does not target AVX2/FMA, and for f64), the exact tile every kernel
// falls back to, and the epilogue store.
#include "ops/cpu/gemm/engine.h"

#include <cmath>
#include <cstring>

#include "framework/half_convert.h"
#include "framework/half_convert_x86.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define HG_GEMM_AVX2 1
#endif

namespace hg::cpu::gemm {

template <class Acc>
void exact_tile(int64_t mr, int64_t nr, int64_t kc, const Acc* a, const Acc* b, Acc* c, int64_t ldc, bool first,
                bool half) {
  const int64_t cols = half ? nr / 2 : nr;
  Acc acc[kMaxR][kMaxR];
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < cols; ++j) acc[i][j] = first ? Acc(0) : c[i * ldc + j];
  for (int64_t k = 0; k < kc; ++k, b += nr)
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < cols; ++j) acc[i][j] = std::fma(a[i * kc + k], b[j], acc[i][j]);
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = acc[i][j];
}

template void exact_tile<float>(int64_t, int64_t, int64_t, const float*, const float*, float*, int64_t, bool, bool);
template void exact_tile<double>(int64_t, int64_t, int64_t, const double*, const double*, double*, int64_t, bool,
                                 bool);

namespace {

constexpr int64_t MR = 6, NR = 16;  // the AVX2 tile: 6x16 f32 = 12 accumulators

void avx2_full(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first) {
#ifdef HG_GEMM_AVX2
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  } else {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  }
  const float *a0 = a, *a1 = a + kc, *a2 = a + 2 * kc, *a3 = a + 3 * kc, *a4 = a + 4 * kc, *a5 = a + 5 * kc;
  for (int64_t k = 0; k < kc; ++k, b += NR) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 x = _mm256_broadcast_ss(a0 + k);
    c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a1 + k);
    c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a2 + k);
    c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a3 + k);
    c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a4 + k);
    c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a5 + k);
    c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
  _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
  _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
#else
  exact_tile(MR, NR, kc, a, b, c, ldc, first, false);
#endif
}

void avx2_half(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first) {
#ifdef HG_GEMM_AVX2
  __m256 c0, c1, c2, c3, c4, c5;
  if (first) {
    c0 = c1 = c2 = c3 = c4 = c5 = _mm256_setzero_ps();
  } else {
    c0 = _mm256_loadu_ps(c), c1 = _mm256_loadu_ps(c + ldc), c2 = _mm256_loadu_ps(c + 2 * ldc);
    c3 = _mm256_loadu_ps(c + 3 * ldc), c4 = _mm256_loadu_ps(c + 4 * ldc), c5 = _mm256_loadu_ps(c + 5 * ldc);
  }
  const float *a0 = a, *a1 = a + kc, *a2 = a + 2 * kc, *a3 = a + 3 * kc, *a4 = a + 4 * kc, *a5 = a + 5 * kc;
  for (int64_t k = 0; k < kc; ++k, b += NR) {
    const __m256 b0 = _mm256_loadu_ps(b);
    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + k), b0, c0);
    c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + k), b0, c1);
    c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a2 + k), b0, c2);
    c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a3 + k), b0, c3);
    c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a4 + k), b0, c4);
    c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a5 + k), b0, c5);
  }
  _mm256_storeu_ps(c, c0), _mm256_storeu_ps(c + ldc, c1), _mm256_storeu_ps(c + 2 * ldc, c2);
  _mm256_storeu_ps(c + 3 * ldc, c3), _mm256_storeu_ps(c + 4 * ldc, c4), _mm256_storeu_ps(c + 5 * ldc, c5);
#else
  exact_tile(MR, NR, kc, a, b, c, ldc, first, true);
#endif
}

void avx2_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  const auto* af = static_cast<const float*>(a);
  const auto* bf = static_cast<const float*>(b);
  if (half)
    avx2_half(kc, af, bf, c, ldc, first);
  else
    avx2_full(kc, af, bf, c, ldc, first);
}

void f64_fn(int64_t kc, const void* a, const void* b, double* c, int64_t ldc, bool first, bool half) {
  exact_tile(MR, NR, kc, static_cast<const double*>(a), static_cast<const double*>(b), c, ldc, first, half);
}

}  // namespace

const Kernel<float>& avx2_kernel() {
  static const Kernel<float> k{"avx2 f32 6x16", MR, NR, avx2_fn};
  return k;
}

const Kernel<double>& f64_kernel() {
  static const Kernel<double> k{"portable f64 6x16", MR, NR, f64_fn};
  return k;
}

namespace {

// One output row: the epilogue's values in Acc, then the one rounding into T (eight at a
// time in AVX2 registers where the row is contiguous: the same operations, value by value).
template <class T, class Acc>
void store_row(const Acc* c, int64_t n0, int64_t nn, T* dst, int64_t sn, const Epilogue<Acc>& ep) {
#ifdef HG_GEMM_AVX2
  if constexpr (std::is_same_v<Acc, float>)
    if (sn == 1) {
      const __m256 alpha = _mm256_set1_ps(ep.alpha), zero = _mm256_setzero_ps();
      int64_t j = 0;
      for (; j + 8 <= nn; j += 8) {
        __m256 x = _mm256_mul_ps(alpha, _mm256_loadu_ps(c + j));
        if (ep.bias) x = _mm256_add_ps(x, _mm256_loadu_ps(ep.bias + n0 + j));
        if (ep.relu) x = _mm256_blendv_ps(x, zero, _mm256_cmp_ps(x, zero, _CMP_LT_OQ));  // NaN stays NaN
        x86::store8(dst + j, x);
      }
      if (j == nn) return;
      if constexpr (!std::is_same_v<T, float>) {
        // The last 1-7 narrowed values (a head's few classes on every row) through a
        // zero-padded register: the same instructions as above, no call per row.
        const size_t r = static_cast<size_t>(nn - j);
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(r)),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 x = _mm256_mul_ps(alpha, _mm256_maskload_ps(c + j, live));  // lanes >= r: zero, never read
        if (ep.bias) x = _mm256_add_ps(x, _mm256_maskload_ps(ep.bias + n0 + j, live));
        if (ep.relu) x = _mm256_blendv_ps(x, zero, _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
        T out[8];
        x86::store8(out, x);
        std::memcpy(dst + j, out, r * sizeof(T));
        return;
      }
      c += j, n0 += j, nn -= j, dst += j;
    }
#endif
  Acc v[NC];
  for (int64_t j = 0; j < nn; ++j) {
    Acc x = ep.alpha * c[j];
    if (ep.bias) x += ep.bias[n0 + j];
    if (ep.relu && x < Acc(0)) x = Acc(0);  // NaN stays NaN
    v[j] = x;
  }
  if constexpr (std::is_same_v<T, Acc>) {
    for (int64_t j = 0; j < nn; ++j) dst[j * sn] = v[j];
  } else if (sn == 1 && std::is_same_v<T, half>) {
    convert_f32_to_f16(v, reinterpret_cast<half*>(dst), static_cast<size_t>(nn));
  } else if (sn == 1 && std::is_same_v<T, bfloat16>) {
    convert_f32_to_bf16(v, reinterpret_cast<bfloat16*>(dst), static_cast<size_t>(nn));
  } else {
    for (int64_t j = 0; j < nn; ++j) dst[j * sn] = store<T>(v[j]);
  }
}

template <class T, class Acc>
void store_typed(const Acc* c, int64_t ldc, int64_t m0, int64_t mn, int64_t n0, int64_t nn, const Output& o,
                 const Epilogue<Acc>& ep) {
  T* base = static_cast<T*>(o.ptr) + n0 * o.sn;
  int64_t z = m0 / (o.I * o.J), i = (m0 / o.J) % o.I, j = m0 % o.J;  // row m0's place, then stepped
  for (int64_t r = 0; r < mn; ++r) {
    store_row(c + r * ldc, n0, nn, base + z * o.sz + i * o.si + j * o.sj, o.sn, ep);
    if (++j == o.J) j = 0, ++i == o.I ? (i = 0, ++z) : 0;
  }
}

}  // namespace

template <>
void store_tile<float>(const float* c, int64_t ldc, int64_t m0, int64_t mn, int64_t n0, int64_t nn, const Output& o,
                       const Epilogue<float>& ep) {
  switch (o.dtype) {
    case DType::f16: return store_typed<half>(c, ldc, m0, mn, n0, nn, o, ep);
    case DType::bf16: return store_typed<bfloat16>(c, ldc, m0, mn, n0, nn, o, ep);
    default: return store_typed<float>(c, ldc, m0, mn, n0, nn, o, ep);
  }
}

template <>
void store_tile<double>(const double* c, int64_t ldc, int64_t m0, int64_t mn, int64_t n0, int64_t nn,
                        const Output& o, const Epilogue<double>& ep) {
  store_typed<double>(c, ldc, m0, mn, n0, nn, o, ep);
}

}  // namespace hg::cpu::gemm
