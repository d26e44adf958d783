// hg::half, IEEE 754 binary16 kept as its 16 bits, and exact conversions to and from it.
// Every CPU kernel rounds through these functions, so overflow to inf, underflow to zero
// and subnormals happen exactly where the standard puts them, independent of the FPU mode.
#pragma once
#include <bit>
#include <cstdint>
#include <limits>

namespace hg {

namespace detail {
// v >> s rounded to nearest, ties to even. A carry out of the significand lands in the
// exponent field, which is the right result at a binade boundary.
constexpr uint64_t half_shift_round_even(uint64_t v, unsigned s) {
  return (v + (uint64_t{1} << (s - 1)) - 1 + ((v >> s) & 1)) >> s;
}
}  // namespace detail

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

// Rounds to nearest, ties to even, in integer arithmetic so no FPU mode (FTZ, DAZ, directed
// rounding) can change the result.
constexpr uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  uint64_t mag;
  if (a > 0x7f800000u) {
    // Keep the top payload bits but force the quiet bit, so a NaN whose payload sits in the
    // low bits cannot turn into inf.
    mag = 0x7e00u | ((a >> 13) & 0x3ffu);
  } else if (a >= 0x477ff000u) {
    mag = 0x7c00u;  // >= 65520, the midpoint between 65504 and 2^16: ties go to the even side, inf
  } else if (a >= 0x38800000u) {
    mag = detail::half_shift_round_even(a - (112u << 23), 13);  // normal: rebias 127 -> 15
  } else if (a <= 0x33000000u) {
    mag = 0;  // at most 2^-25, half the smallest subnormal: the tie goes to even, zero
  } else {
    // Subnormal result: the value in units of 2^-24 is the full significand m * 2^(e - 126).
    const uint32_t e = a >> 23;
    mag = detail::half_shift_round_even((a & 0x7fffffu) | 0x800000u, 126 - e);
  }
  return static_cast<uint16_t>(sign | mag);
}

// Rounds once, straight from the double. Going through float would round twice and can
// land on the wrong side of a tie (1 + 2^-11 + 2^-30 must give 1 + 2^-10, not 1).
constexpr uint16_t double_to_half_bits(double d) {
  const uint64_t x = std::bit_cast<uint64_t>(d);
  const uint64_t sign = (x >> 48) & 0x8000u;
  const uint64_t a = x & 0x7fffffffffffffffu;
  uint64_t mag;
  if (a > 0x7ff0000000000000u) {
    mag = 0x7e00u | ((a >> 42) & 0x3ffu);
  } else if (a >= 0x40effe0000000000u) {
    mag = 0x7c00u;  // >= 65520
  } else if (a >= 0x3f10000000000000u) {
    mag = detail::half_shift_round_even(a - (uint64_t{1008} << 52), 42);  // rebias 1023 -> 15
  } else if (a <= 0x3e60000000000000u) {
    mag = 0;  // <= 2^-25
  } else {
    const uint64_t e = a >> 52;
    mag = detail::half_shift_round_even((a & 0xfffffffffffffu) | (uint64_t{1} << 52), static_cast<unsigned>(1051 - e));
  }
  return static_cast<uint16_t>(sign | mag);
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
