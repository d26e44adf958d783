// An independent model of a 16-bit binary float format (IEEE binary16 and bfloat16 differ
// only in how the 15 bits split between exponent and significand): values decoded with
// ldexp, rounding by locating the neighbouring representable values. The conversion tests
// of both types check hg's bit manipulations against it.
#pragma once
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace hg::test {

struct Format16 {
  int mantissa_bits;  // 10 for binary16, 7 for bfloat16; the exponent has the other 15 - m
  uint16_t mantissa_mask() const { return static_cast<uint16_t>((1u << mantissa_bits) - 1); }
  uint16_t inf_bits() const { return static_cast<uint16_t>(0x7fff & ~mantissa_mask()); }
  uint16_t quiet_bit() const { return static_cast<uint16_t>(1u << (mantissa_bits - 1)); }
  int bias() const { return (1 << (14 - mantissa_bits)) - 1; }
  bool is_nan(uint16_t b) const { return (b & inf_bits()) == inf_bits() && (b & mantissa_mask()) != 0; }

  // The definition read literally; the all-ones exponent decodes as a normal number, the
  // value an unbounded exponent would put after the largest finite one (2^16 for binary16).
  double unbounded_value(uint16_t b) const {
    const int e = (b & inf_bits()) >> mantissa_bits;
    const int m = b & mantissa_mask();
    const int lowest = 1 - bias() - mantissa_bits;  // the exponent of the smallest subnormal
    const double mag = e == 0 ? std::ldexp(m, lowest) : std::ldexp((1 << mantissa_bits) + m, lowest + e - 1);
    return (b & 0x8000) ? -mag : mag;
  }

  double value(uint16_t b) const {
    if ((b & inf_bits()) == inf_bits()) {
      if (b & mantissa_mask()) return std::numeric_limits<double>::quiet_NaN();
      return (b & 0x8000) ? -HUGE_VAL : HUGE_VAL;
    }
    return unbounded_value(b);
  }
};

inline constexpr Format16 kBinary16{10};
inline constexpr Format16 kBfloat16{7};

// Round-to-nearest-even by search: the grid holds every finite non-negative value plus the
// unbounded one after the largest, so a value past the last midpoint rounds to it, which
// overflows to inf.
class RoundingReference {
 public:
  explicit RoundingReference(Format16 f) : inf_(f.inf_bits()) {
    for (uint32_t b = 0; b <= inf_; ++b) grid_.push_back(f.unbounded_value(static_cast<uint16_t>(b)));
  }

  uint16_t round(double v) const {
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double mag = std::fabs(v);
    if (mag >= grid_.back()) return sign | inf_;
    const size_t hi = static_cast<size_t>(std::upper_bound(grid_.begin(), grid_.end(), mag) - grid_.begin());
    const size_t lo = hi - 1;
    const double mid = (grid_[lo] + grid_[hi]) / 2;  // exact: at most 12 significant bits
    const size_t pick = mag < mid ? lo : mag > mid ? hi : (lo % 2 == 0 ? lo : hi);
    return static_cast<uint16_t>(sign | pick);
  }

 private:
  uint16_t inf_;
  std::vector<double> grid_;
};

inline uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
inline float float_of(uint32_t u) { return std::bit_cast<float>(u); }

inline std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Compares conversions with the reference; reports the first few misses only, so a
// broken build prints a readable failure instead of a million.
struct Tally {
  int bad = 0;
  template <class Message>
  void check(bool ok, Message&& what) {
    if (!ok && ++bad <= 5) FAIL_CHECK(what());
  }
};

// `got` = the conversion of f under test. A NaN must stay a quiet NaN of the same sign.
inline void check_float_conversion(Tally& t, const RoundingReference& ref, Format16 fmt, float f, uint16_t got) {
  if (std::isnan(f)) {
    t.check(fmt.is_nan(got) && (got & fmt.quiet_bit()) && ((got & 0x8000) != 0) == std::signbit(f),
            [&] { return "float " + hex(bits_of(f)) + " is NaN, got " + hex(got); });
  } else {
    const uint16_t want = ref.round(f);
    t.check(got == want, [&] { return "float " + hex(bits_of(f)) + " -> " + hex(got) + ", want " + hex(want); });
  }
}

inline void check_double_conversion(Tally& t, const RoundingReference& ref, double d, uint16_t got) {
  const uint16_t want = ref.round(d);
  t.check(got == want,
          [&] { return "double " + hex(std::bit_cast<uint64_t>(d)) + " -> " + hex(got) + ", want " + hex(want); });
}

}  // namespace hg::test
