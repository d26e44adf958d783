// Z16, sixteen f32 lanes in one AVX-512 register: the 16-lane counterpart of vec8.h's F8 for
// kernels written once over a lane type V (V::kLanes, V::operand, V::load, V::store, + - *,
// the ordered compares and select). Every operation is the same IEEE operation as F8's on
// each lane, and the f16/bf16 conversions give the scalar conversions' bits (round to
// nearest even; a NaN stays a NaN with its quiet bit set). Usable only from code compiled
// for AVX-512 F/BW/VL/DQ (a file under `#pragma GCC target`) and run where hg::cpu::isa()
// is avx512 or wider. Internal, not installed.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "framework/bfloat16.h"
#include "framework/half.h"

#define HG_X86_V4 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) inline

namespace hg::cpu::vec {

struct Z16 {
  static constexpr int64_t kLanes = 16;
  __m512 v;

  Z16() = default;
  HG_X86_V4 explicit Z16(__m512 x) : v(x) {}
  HG_X86_V4 explicit Z16(float s) : v(_mm512_set1_ps(s)) {}

  HG_X86_V4 static Z16 load(const float* p) { return Z16(_mm512_loadu_ps(p)); }
  // T values widened for use as an operand of + - * only (which quiets a signaling NaN
  // itself): vcvtph2ps is exact; bf16 -> f32 is a 16-bit shift.
  HG_X86_V4 static Z16 operand(const float* p) { return load(p); }
  HG_X86_V4 static Z16 operand(const half* p) {
    return Z16(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  HG_X86_V4 static Z16 operand(const bfloat16* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return Z16(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }

  HG_X86_V4 static void store(float* p, Z16 a) { _mm512_storeu_ps(p, a.v); }
  // The rounding mode is in the immediate: MXCSR cannot change the result.
  HG_X86_V4 static void store(half* p, Z16 a) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT));
  }
  // Round to nearest even in integers, (x + 0x7fff + lsb) >> 16; a NaN is truncated with its
  // quiet bit forced instead (rounding its bits could carry into inf or the sign).
  HG_X86_V4 static void store(bfloat16* p, Z16 a) {
    const __m512i x = _mm512_castps_si512(a.v);
    const __m512i top = _mm512_srli_epi32(x, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_and_si512(top, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q);
    const __m512i q = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(top, _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(q));  // every lane < 2^16
  }
};

struct M16 {
  __mmask16 m;
};

HG_X86_V4 Z16 operator+(Z16 a, Z16 b) { return Z16(_mm512_add_ps(a.v, b.v)); }
HG_X86_V4 Z16 operator-(Z16 a, Z16 b) { return Z16(_mm512_sub_ps(a.v, b.v)); }
HG_X86_V4 Z16 operator*(Z16 a, Z16 b) { return Z16(_mm512_mul_ps(a.v, b.v)); }

// Ordered, non-signaling (false for NaN, as C++'s >); != unordered (true for NaN, as C++'s).
HG_X86_V4 M16 operator>(Z16 a, Z16 b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ)}; }
HG_X86_V4 M16 operator!=(Z16 a, Z16 b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_NEQ_UQ)}; }
HG_X86_V4 Z16 select(M16 m, Z16 a, Z16 b) { return Z16(_mm512_mask_blend_ps(m.m, b.v, a.v)); }

}  // namespace hg::cpu::vec
#endif
