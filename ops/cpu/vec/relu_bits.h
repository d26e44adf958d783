// ReLU and its gradient on f16/bf16 bit patterns, without widening to f32 and rounding
// back. Both ops only pass a value through or replace it with +0, so the result is a
// bit operation: the same bits as widen -> select in f32 -> round, where a NaN comes back
// with its quiet bit set (the widening quiets it). On AVX2 sixteen values per step: the
// f32 path spends most of its time in the conversions (bf16 has no conversion
// instruction before AVX512_BF16), this one is a load, five integer ops and a store.
#pragma once
#include <cstdint>
#include <type_traits>

#include "framework/bfloat16.h"
#include "framework/half.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace hg::cpu::vec {

// What the bit ops need of a 16-bit format: the bits of +inf (every larger magnitude is
// a NaN) and its quiet bit (the top bit of the significand).
struct Format16 {
  uint16_t inf, quiet;
};

template <class T>
inline constexpr bool kBits16 = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <class T>
constexpr Format16 format16() {
  if constexpr (std::is_same_v<T, half>) return {0x7c00, 0x0200};
  else return {0x7f80, 0x0040};
}

// x > 0 as a number: positive, not NaN (as a signed 16-bit integer, in (0, inf]).
constexpr bool positive_bits(uint16_t x, Format16 f) {
  const auto s = static_cast<int16_t>(x);
  return s > 0 && s <= static_cast<int16_t>(f.inf);
}
constexpr bool nan_bits(uint16_t x, Format16 f) { return (x & 0x7fff) > f.inf; }
constexpr uint16_t quiet_bits(uint16_t x, Format16 f) { return nan_bits(x, f) ? static_cast<uint16_t>(x | f.quiet) : x; }

// relu(x) = x if x > 0, x (quieted) if NaN, else +0.
constexpr uint16_t relu_bits(uint16_t x, Format16 f) {
  if (positive_bits(x, f)) return x;
  return nan_bits(x, f) ? static_cast<uint16_t>(x | f.quiet) : uint16_t{0};
}

// relu_grad(g, y) = g (quieted if NaN) where y > 0, else +0.
constexpr uint16_t relu_grad_bits(uint16_t g, uint16_t y, Format16 f) {
  return positive_bits(y, f) ? quiet_bits(g, f) : uint16_t{0};
}

#if defined(__AVX2__)
namespace detail16 {
struct Masks {
  __m256i abs, inf, quiet, zero;
  explicit Masks(Format16 f)
      : abs(_mm256_set1_epi16(0x7fff)),
        inf(_mm256_set1_epi16(static_cast<int16_t>(f.inf))),
        quiet(_mm256_set1_epi16(static_cast<int16_t>(f.quiet))),
        zero(_mm256_setzero_si256()) {}
  __m256i nan(__m256i x) const { return _mm256_cmpgt_epi16(_mm256_and_si256(x, abs), inf); }
  __m256i positive(__m256i x) const { return _mm256_andnot_si256(_mm256_cmpgt_epi16(x, inf), _mm256_cmpgt_epi16(x, zero)); }
};
inline __m256i load16(const uint16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store16(uint16_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
}  // namespace detail16
#endif

// out[i] = relu(x[i]) over n contiguous values; out may be x.
inline void relu16(int64_t n, const uint16_t* x, uint16_t* out, Format16 f) {
  int64_t i = 0;
#if defined(__AVX2__)
  const detail16::Masks m(f);
  for (; i + 16 <= n; i += 16) {
    const __m256i v = detail16::load16(x + i);
    const __m256i nan = m.nan(v);
    const __m256i keep = _mm256_or_si256(m.positive(v), nan);
    detail16::store16(out + i, _mm256_or_si256(_mm256_and_si256(v, keep), _mm256_and_si256(nan, m.quiet)));
  }
#endif
  for (; i < n; ++i) out[i] = relu_bits(x[i], f);
}

// out[i] = relu_grad(g[i], y[i]) over n contiguous values; out may be g.
inline void relu_grad16(int64_t n, const uint16_t* g, const uint16_t* y, uint16_t* out, Format16 f) {
  int64_t i = 0;
#if defined(__AVX2__)
  const detail16::Masks m(f);
  for (; i + 16 <= n; i += 16) {
    const __m256i gv = detail16::load16(g + i);
    const __m256i gq = _mm256_or_si256(gv, _mm256_and_si256(m.nan(gv), m.quiet));
    detail16::store16(out + i, _mm256_and_si256(gq, m.positive(detail16::load16(y + i))));
  }
#endif
  for (; i < n; ++i) out[i] = relu_grad_bits(g[i], y[i], f);
}

}  // namespace hg::cpu::vec
