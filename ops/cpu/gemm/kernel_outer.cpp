// The outer-product micro-kernels (kernel.h's OuterKernel): AVX2 tiles of 4 rows by 16 or
// 24 columns (8 or 12 ymm accumulators) and AVX-512 tiles of 8 rows by 16, 32 or 48
// columns (8, 16 or 24 zmm accumulators, compiled in a target region and run only when
// isa() >= avx512), and the portable chain they all equal bitwise.
#include <cmath>

#include "ops/cpu/gemm/kernel.h"
#include "ops/cpu/gemm/outer_avx2.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HG_OUTER_AVX512 1
#endif

namespace hg::cpu::gemm {

template <class Acc>
void outer_tile(int64_t mr, int64_t nr, int64_t kc, const Acc* a, const Acc* b, Acc* c, int64_t ldc, bool first) {
  Acc acc[kMaxR][kMaxR];
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) acc[i][j] = first ? Acc(0) : c[i * ldc + j];
  for (int64_t k = 0; k < kc; ++k, a += mr, b += nr)
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < nr; ++j) acc[i][j] = std::fma(a[i], b[j], acc[i][j]);
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) c[i * ldc + j] = acc[i][j];
}

template void outer_tile<float>(int64_t, int64_t, int64_t, const float*, const float*, float*, int64_t, bool);
template void outer_tile<double>(int64_t, int64_t, int64_t, const double*, const double*, double*, int64_t, bool);

namespace {

// MR rows, V vectors of 8 columns, both panels k-major (outer_avx2.h).
template <int MR, int V>
void avx2_outer(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first) {
  outer_avx2<MR, V>(kc, a, MR, b, 8 * V, c, ldc, first);
}

}  // namespace
}  // namespace hg::cpu::gemm

#ifdef HG_OUTER_AVX512
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
#include "ops/cpu/gemm/outer_avx512.h"
namespace hg::cpu::gemm {
namespace {

// MR rows, V vectors of 16 columns, both panels k-major (outer_avx512.h).
template <int MR, int V>
void avx512_outer(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first) {
  outer_avx512<MR, V>(1, kc, a, MR, 0, b, 16 * V, c, ldc, first);
}

}  // namespace
}  // namespace hg::cpu::gemm
#pragma GCC pop_options
#endif

namespace hg::cpu::gemm {

namespace {

void f64_outer(int64_t kc, const double* a, const double* b, double* c, int64_t ldc, bool first) {
  outer_tile<double>(4, 16, kc, a, b, c, ldc, first);
}

}  // namespace

const std::vector<const OuterKernel<float>*>& avx2_outer_kernels() {
  static const OuterKernel<float> k16{"avx2 f32 outer 4x16", 4, 16, avx2_outer<4, 2>};
  static const OuterKernel<float> k24{"avx2 f32 outer 4x24", 4, 24, avx2_outer<4, 3>};
  static const std::vector<const OuterKernel<float>*> all{&k16, &k24};
  return all;
}

const std::vector<const OuterKernel<float>*>& avx512_outer_kernels() {
#ifdef HG_OUTER_AVX512
  static const OuterKernel<float> k16{"avx512 f32 outer 8x16", 8, 16, avx512_outer<8, 1>};
  static const OuterKernel<float> k32{"avx512 f32 outer 8x32", 8, 32, avx512_outer<8, 2>};
  static const OuterKernel<float> k48{"avx512 f32 outer 8x48", 8, 48, avx512_outer<8, 3>};
  static const std::vector<const OuterKernel<float>*> all{&k16, &k32, &k48};
  return all;
#else
  return avx2_outer_kernels();
#endif
}

const OuterKernel<double>& f64_outer_kernel() {
  static const OuterKernel<double> k{"portable f64 outer 4x16", 4, 16, f64_outer};
  return k;
}

}  // namespace hg::cpu::gemm
