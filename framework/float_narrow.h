// Rounding an IEEE 754 binary value to a narrower binary format, to nearest with ties to
// even, in integer arithmetic: the one encoder behind hg::half and hg::bfloat16 from float
// and from double, so no FPU mode (FTZ, DAZ, directed rounding) can change a result.
#pragma once
#include <cstdint>
#include <type_traits>

namespace hg::detail {

// v >> s rounded to nearest, ties to even (s >= 1). A carry out of the significand lands in
// the exponent field, which is the right result at a binade boundary.
template <class U>
constexpr U shift_round_even(U v, int s) {
  return (v + (U{1} << (s - 1)) - 1 + ((v >> s) & 1)) >> s;
}

// The bits of the value of format (ToExp exponent bits, ToMan fraction bits) nearest to the
// value whose bits are x in format (FromExp, FromMan); the target has no more bits in either
// field, and its subnormals are normals of the source. Overflow gives inf (from the midpoint
// above the largest finite value on), underflow the nearest subnormal or zero. A NaN stays
// NaN: quiet, with the top payload bits kept, so a payload in the low bits alone cannot turn
// into inf. The arithmetic is as wide as the source: 32-bit for float, so that a loop of
// conversions vectorises.
template <int FromExp, int FromMan, int ToExp, int ToMan>
constexpr uint16_t narrow_float_bits(std::conditional_t<(1 + FromExp + FromMan <= 32), uint32_t, uint64_t> x) {
  static_assert(ToExp <= FromExp && ToMan < FromMan && 1 + ToExp + ToMan <= 16 && 1 + FromExp + FromMan <= 64);
  static_assert(ToExp == FromExp || (1 << (FromExp - 1)) - (1 << (ToExp - 1)) - ToMan >= 1,
                "the target's subnormals must be normals of the source");
  using U = decltype(x);
  constexpr int kFromBias = (1 << (FromExp - 1)) - 1, kToBias = (1 << (ToExp - 1)) - 1;
  constexpr int kDrop = FromMan - ToMan;  // fraction bits a normal result rounds away
  constexpr U kFromManMask = (U{1} << FromMan) - 1, kToManMask = (U{1} << ToMan) - 1;
  constexpr U kFromMag = (U{1} << (FromExp + FromMan)) - 1;
  constexpr U kFromInf = kFromMag & ~kFromManMask;
  constexpr U kToInf = ((U{1} << ToExp) - 1) << ToMan, kToQuiet = U{1} << (ToMan - 1);
  const U sign = ((x >> (FromExp + FromMan)) & 1) << (ToExp + ToMan);
  const U a = x & kFromMag;
  if (a > kFromInf) return static_cast<uint16_t>(sign | kToInf | kToQuiet | ((a >> kDrop) & kToManMask));
  if constexpr (ToExp == FromExp) {
    // One exponent range (bf16 from float): subnormals line up too, and the largest finite
    // value rounds at most to inf, so the bits round as they are, the sign riding along.
    return static_cast<uint16_t>(shift_round_even(x, kDrop));
  } else {
    // Thresholds in the source's bits: the midpoint above the target's largest finite value
    // (a tie goes to the even side, inf), its smallest normal, and half its smallest
    // subnormal (a tie goes to the even side, zero).
    constexpr U kRebias = static_cast<U>(kFromBias - kToBias) << FromMan;
    constexpr U kOverflow = kRebias + ((kToInf - 1) << kDrop) + (U{1} << (kDrop - 1));
    constexpr U kMinNormal = kRebias + (U{1} << FromMan);
    constexpr U kZeroMax = kRebias - (static_cast<U>(ToMan) << FromMan);
    if (a >= kOverflow) return static_cast<uint16_t>(sign | kToInf);
    if (a >= kMinNormal) return static_cast<uint16_t>(sign | shift_round_even(a - kRebias, kDrop));
    if (a <= kZeroMax) return static_cast<uint16_t>(sign);
    // A subnormal result: the value in units of the target's smallest subnormal is the full
    // significand shifted right by s.
    const int s = kFromBias - kToBias + kDrop + 1 - static_cast<int>(a >> FromMan);
    return static_cast<uint16_t>(sign | shift_round_even((a & kFromManMask) | (U{1} << FromMan), s));
  }
}

}  // namespace hg::detail
