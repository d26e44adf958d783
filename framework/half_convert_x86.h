// Eight f16/bf16 values to and from one AVX register of f32, bit-identical to the scalar
// conversions in half.h/bfloat16.h (NaNs come back quiet, ties go to even). Internal: used
// by half_convert.cpp and the CPU kernels' vector loops (ops/cpu/vec/), not installed.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "framework/bfloat16.h"
#include "framework/half.h"

// Callable from code built for x86-64-v3 or from functions with the same target attribute.
#define HG_X86_V3 __attribute__((target("avx2,f16c"), always_inline)) inline

namespace hg::x86 {

// vcvtph2ps is exact and quiets a signaling NaN, as half_bits_to_float does.
HG_X86_V3 __m256 load_f16x8(const half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// The rounding mode is in the immediate, so MXCSR cannot change the result; a NaN keeps
// its top payload bits with the quiet bit set, as float_to_half_bits does.
HG_X86_V3 void store_f16x8(half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

// bf16 -> f32 is a 16-bit shift; a NaN gets its quiet bit, as in bf16_bits_to_float. The
// NaN test is an unordered compare of the value with itself: one instruction, and no FPU
// mode (DAZ) changes which lanes are NaN.
HG_X86_V3 __m256 load_bf16x8(const bfloat16* p) {
  const __m256 x = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_or_ps(x, _mm256_and_ps(nan, _mm256_castsi256_ps(_mm256_set1_epi32(0x400000))));
}

// The same widening without the quieting, for a value whose only use is as an operand of
// an arithmetic op (+, -, *, fma): the op quiets a signaling NaN itself and keeps its
// payload, so the result has the same bits, for three instructions fewer per 8 values.
HG_X86_V3 __m256 load_bf16x8_operand(const bfloat16* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

// Round to nearest even in integer arithmetic (x + 0x7fff + lsb) >> 16, exactly as
// float_to_bf16_bits; a NaN is truncated with its quiet bit forced instead, since rounding
// its bits could carry into inf or the sign.
HG_X86_V3 __m128i f32_to_bf16_bits8(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i top = _mm256_srli_epi32(x, 16);
  const __m256i bias = _mm256_add_epi32(_mm256_and_si256(top, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256i q = _mm256_blendv_epi8(r, _mm256_or_si256(top, _mm256_set1_epi32(0x40)), _mm256_castps_si256(nan));
  return _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
}

HG_X86_V3 void store_bf16x8(bfloat16* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), f32_to_bf16_bits8(v));
}

// Four values into the low half of a register, read straight from memory (a load of 8 bytes:
// no store into a zero-padded buffer whose 16-byte reload would stall store forwarding).
HG_X86_V3 __m128 load_f16x4(const half* p) {
  return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
HG_X86_V3 __m128 load_bf16x4(const bfloat16* p) {
  const __m128 x = _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 16));
  const __m128 nan = _mm_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm_or_ps(x, _mm_and_ps(nan, _mm_castsi128_ps(_mm_set1_epi32(0x400000))));
}

// The same, overloaded on the element type, for code generic over f32/f16/bf16.
HG_X86_V3 __m128 load4(const float* p) { return _mm_loadu_ps(p); }
HG_X86_V3 __m128 load4(const half* p) { return load_f16x4(p); }
HG_X86_V3 __m128 load4(const bfloat16* p) { return load_bf16x4(p); }
HG_X86_V3 __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
HG_X86_V3 __m256 load8(const half* p) { return load_f16x8(p); }
HG_X86_V3 __m256 load8(const bfloat16* p) { return load_bf16x8(p); }
HG_X86_V3 __m256 load8_operand(const float* p) { return _mm256_loadu_ps(p); }
HG_X86_V3 __m256 load8_operand(const half* p) { return load_f16x8(p); }
HG_X86_V3 __m256 load8_operand(const bfloat16* p) { return load_bf16x8_operand(p); }
HG_X86_V3 void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
HG_X86_V3 void store8(half* p, __m256 v) { store_f16x8(p, v); }
HG_X86_V3 void store8(bfloat16* p, __m256 v) { store_bf16x8(p, v); }

}  // namespace hg::x86
#endif
