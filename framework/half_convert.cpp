// Bulk f32 <-> f16/bf16 conversion: F16C (f16) and AVX2 integer code (bf16) when the CPU
// has them, the exact scalar code otherwise. Both give identical bits on every machine.
#include "framework/half_convert.h"

#include <algorithm>

#include "framework/half_convert_x86.h"
#if defined(__x86_64__) || defined(__i386__)
#define HG_X86 1
#endif

namespace hg {

bool cpu_has_f16c() {
#ifdef HG_X86
  // The vector paths use YMM registers, so the OS must also save AVX state (which
  // __builtin_cpu_supports checks); bf16 needs AVX2's integer instructions.
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
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

void convert_bf16_to_f32_portable(const bfloat16* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(src[i].bits);
}

void convert_f32_to_bf16_portable(const float* src, bfloat16* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i].bits = float_to_bf16_bits(src[i]);
}

#ifdef HG_X86
namespace {

// The tail goes through the same instructions via a padded block, so the whole output of
// this path is the vector code's and a test comparing it with the portable path covers
// every element.
template <class S, class D>
__attribute__((target("avx2,f16c"))) void convert_x86(const S* src, D* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) x86::store8(dst + i, x86::load8(src + i));
  if (i == n) return;
  S in[8] = {};
  D out[8];
  std::copy(src + i, src + n, in);
  x86::store8(out, x86::load8(in));
  std::copy(out, out + (n - i), dst + i);
}

}  // namespace
#define HG_CONVERT(S, D, portable)                   \
  if (cpu_has_f16c()) return convert_x86<S, D>(src, dst, n); \
  portable(src, dst, n)
#else
#define HG_CONVERT(S, D, portable) portable(src, dst, n)
#endif

void convert_f16_to_f32(const half* src, float* dst, size_t n) { HG_CONVERT(half, float, convert_f16_to_f32_portable); }
void convert_f32_to_f16(const float* src, half* dst, size_t n) { HG_CONVERT(float, half, convert_f32_to_f16_portable); }
void convert_bf16_to_f32(const bfloat16* src, float* dst, size_t n) {
  HG_CONVERT(bfloat16, float, convert_bf16_to_f32_portable);
}
void convert_f32_to_bf16(const float* src, bfloat16* dst, size_t n) {
  HG_CONVERT(float, bfloat16, convert_f32_to_bf16_portable);
}

}  // namespace hg
