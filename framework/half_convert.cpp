// Bulk f32 <-> f16/bf16 conversion: F16C for f16 when available, the exact scalar code
// otherwise. Both give identical bits, so results do not depend on the machine.
#include "framework/half_convert.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HG_X86 1
#endif

namespace hg {

bool cpu_has_f16c() {
#ifdef HG_X86
  // F16C's instructions use YMM registers, so the OS must also save AVX state.
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

void convert_f16_to_f32_portable(const half* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = half_bits_to_float(src[i].bits);
}

void convert_f32_to_f16_portable(const float* src, half* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i].bits = float_to_half_bits(src[i]);
}

#ifdef HG_X86
namespace {

// The tail goes through the same instruction via a padded block, so the whole output of
// this path is F16C's and a test comparing it with the portable path covers every element.
__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const half* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i == n) return;
  half in[8] = {};
  float out[8];
  std::copy(src + i, src + n, in);
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
  std::copy(out, out + (n - i), dst + i);
}

// The rounding mode is in the immediate, so MXCSR's mode cannot change the result.
__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* src, half* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  if (i == n) return;
  float in[8] = {};
  half out[8];
  std::copy(src + i, src + n, in);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
  std::copy(out, out + (n - i), dst + i);
}

}  // namespace
#endif

void convert_f16_to_f32(const half* src, float* dst, size_t n) {
#ifdef HG_X86
  if (cpu_has_f16c()) return f16_to_f32_f16c(src, dst, n);
#endif
  convert_f16_to_f32_portable(src, dst, n);
}

void convert_f32_to_f16(const float* src, half* dst, size_t n) {
#ifdef HG_X86
  if (cpu_has_f16c()) return f32_to_f16_f16c(src, dst, n);
#endif
  convert_f32_to_f16_portable(src, dst, n);
}

void convert_bf16_to_f32(const bfloat16* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(src[i].bits);
}

void convert_f32_to_bf16(const float* src, bfloat16* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i].bits = float_to_bf16_bits(src[i]);
}

}  // namespace hg
