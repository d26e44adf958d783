// hg::bfloat16, the top 16 bits of an IEEE binary32 (1 sign, 8 exponent, 7 fraction bits),
// and exact conversions to and from it: float's range with a much coarser grid, so rounding
// (not overflow) is what bf16 training has to survive.
#pragma once
#include <bit>
#include <cstdint>
#include <limits>

#include "framework/float_narrow.h"

namespace hg {

// A signaling NaN comes back quiet, as from any IEEE conversion and as hg::half does.
constexpr float bf16_bits_to_float(uint16_t b) {
  const uint32_t x = uint32_t{b} << 16;
  const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
  return std::bit_cast<float>(nan ? x | 0x400000u : x);
}

// Rounds to nearest, ties to even (framework/float_narrow.h). bf16 shares float's exponent
// range, so only the fraction rounds: past the largest bf16 it carries into inf.
constexpr uint16_t float_to_bf16_bits(float f) {
  return detail::narrow_float_bits<8, 23, 8, 7>(std::bit_cast<uint32_t>(f));
}

// Rounds once, straight from the double; through float, 1 + 2^-8 + 2^-40 would first become
// the tie 1 + 2^-8 and then round to 1 instead of 1 + 2^-7.
constexpr uint16_t double_to_bf16_bits(double d) {
  return detail::narrow_float_bits<11, 52, 8, 7>(std::bit_cast<uint64_t>(d));
}

// Like hg::half, no operators: compute in float, round once, compare as floats.
struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  constexpr explicit bfloat16(float f) : bits(float_to_bf16_bits(f)) {}
  constexpr explicit bfloat16(double d) : bits(double_to_bf16_bits(d)) {}
  constexpr explicit operator float() const { return bf16_bits_to_float(bits); }
  constexpr explicit operator double() const { return bf16_bits_to_float(bits); }

  static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 v;
    v.bits = b;
    return v;
  }
};

static_assert(sizeof(bfloat16) == 2);

}  // namespace hg

template <>
class std::numeric_limits<hg::bfloat16> {
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
  static constexpr bool is_iec559 = false;  // not one of IEEE 754's formats
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr hg::bfloat16 min() noexcept { return hg::bfloat16::from_bits(0x0080); }
  static constexpr hg::bfloat16 lowest() noexcept { return hg::bfloat16::from_bits(0xff7f); }
  static constexpr hg::bfloat16 max() noexcept { return hg::bfloat16::from_bits(0x7f7f); }
  static constexpr hg::bfloat16 epsilon() noexcept { return hg::bfloat16::from_bits(0x3c00); }
  static constexpr hg::bfloat16 round_error() noexcept { return hg::bfloat16::from_bits(0x3f00); }
  static constexpr hg::bfloat16 infinity() noexcept { return hg::bfloat16::from_bits(0x7f80); }
  static constexpr hg::bfloat16 quiet_NaN() noexcept { return hg::bfloat16::from_bits(0x7fc0); }
  static constexpr hg::bfloat16 signaling_NaN() noexcept { return hg::bfloat16::from_bits(0x7fa0); }
  static constexpr hg::bfloat16 denorm_min() noexcept { return hg::bfloat16::from_bits(0x0001); }
};
