// hg::half, IEEE 754 binary16 kept as its 16 bits, and exact conversions to and from it.
// Every CPU kernel rounds through these functions, so overflow to inf, underflow to zero
// and subnormals happen exactly where the standard puts them, independent of the FPU mode.
#pragma once
#include <bit>
#include <cstdint>
#include <limits>

#include "framework/float_narrow.h"

namespace hg {

// A signaling NaN comes back quiet: a conversion is an IEEE operation, and F16C's
// vcvtph2ps does the same, so the portable and hardware paths agree bit for bit.
constexpr float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp == 0) {
    // mant * 2^-24 is exact in float whatever the rounding mode: a 10-bit integer times a power of two.
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -mag : mag;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

// Rounds to nearest, ties to even (framework/float_narrow.h): overflow to inf from 65520
// on, the midpoint above 65504; underflow to the nearest subnormal, zero at or below 2^-25.
constexpr uint16_t float_to_half_bits(float f) {
  return detail::narrow_float_bits<8, 23, 5, 10>(std::bit_cast<uint32_t>(f));
}

// Rounds once, straight from the double. Going through float would round twice and can
// land on the wrong side of a tie (1 + 2^-11 + 2^-30 must give 1 + 2^-10, not 1).
constexpr uint16_t double_to_half_bits(double d) {
  return detail::narrow_float_bits<11, 52, 5, 10>(std::bit_cast<uint64_t>(d));
}

// No comparison or arithmetic operators on purpose: arithmetic happens in float and is rounded
// once on the way back, and comparisons are written float(a) == float(b) so that the +0/-0
// and NaN rules are float's, visibly.
struct half {
  uint16_t bits = 0;

  half() = default;
  constexpr explicit half(float f) : bits(float_to_half_bits(f)) {}
  constexpr explicit half(double d) : bits(double_to_half_bits(d)) {}
  constexpr explicit operator float() const { return half_bits_to_float(bits); }
  constexpr explicit operator double() const { return half_bits_to_float(bits); }

  static constexpr half from_bits(uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(half) == 2);

}  // namespace hg

template <>
class std::numeric_limits<hg::half> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr hg::half min() noexcept { return hg::half::from_bits(0x0400); }
  static constexpr hg::half lowest() noexcept { return hg::half::from_bits(0xfbff); }
  static constexpr hg::half max() noexcept { return hg::half::from_bits(0x7bff); }
  static constexpr hg::half epsilon() noexcept { return hg::half::from_bits(0x1400); }
  static constexpr hg::half round_error() noexcept { return hg::half::from_bits(0x3800); }
  static constexpr hg::half infinity() noexcept { return hg::half::from_bits(0x7c00); }
  static constexpr hg::half quiet_NaN() noexcept { return hg::half::from_bits(0x7e00); }
  static constexpr hg::half signaling_NaN() noexcept { return hg::half::from_bits(0x7d00); }
  static constexpr hg::half denorm_min() noexcept { return hg::half::from_bits(0x0001); }
};
