// hg::half against an independent model of IEEE binary16 (ldexp decoding, rounding by
// locating the neighbouring representable values), plus the bulk F16C and portable paths.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/half.h"
#include "framework/half_convert.h"
#include "tests/framework/format16_reference.h"

using hg::half;

namespace {

using namespace hg::test;

bool half_is_nan(uint16_t b) { return kBinary16.is_nan(b); }
double unbounded_value(uint16_t b) { return kBinary16.unbounded_value(b); }
double reference_value(uint16_t b) { return kBinary16.value(b); }

const RoundingReference& reference() {
  static const RoundingReference r(kBinary16);
  return r;
}

void check_from_float(Tally& t, float f) { check_float_conversion(t, reference(), kBinary16, f, hg::float_to_half_bits(f)); }
void check_from_double(Tally& t, double d) { check_double_conversion(t, reference(), d, hg::double_to_half_bits(d)); }

uint16_t h16(float f) { return hg::float_to_half_bits(f); }

}  // namespace

TEST_CASE("half is a 2-byte trivially copyable standard-layout value", "[half]") {
  STATIC_REQUIRE(sizeof(half) == 2);
  STATIC_REQUIRE(std::is_trivially_copyable_v<half>);
  STATIC_REQUIRE(std::is_standard_layout_v<half>);
  STATIC_REQUIRE(!std::is_convertible_v<float, half>);  // conversions are explicit
  STATIC_REQUIRE(!std::is_convertible_v<half, float>);
  STATIC_REQUIRE(half(1.0f).bits == 0x3c00);
  CHECK(half().bits == 0);
  CHECK(half(-2.0f).bits == 0xc000);
  CHECK(half(0.1).bits == 0x2e66);  // 0.0999755859375, the nearest half to 0.1
  CHECK(static_cast<double>(half::from_bits(0x2e66)) == 0.0999755859375);
  CHECK(static_cast<float>(half::from_bits(0x3555)) == 0x1.554p-2f);
}

TEST_CASE("every half decodes to its IEEE value and survives float -> half", "[half]") {
  Tally t;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float f = hg::half_bits_to_float(h);
    const uint16_t back = hg::float_to_half_bits(f);
    if (half_is_nan(h)) {
      // A signaling NaN is quieted on the way to float; sign and payload are kept.
      t.check(std::isnan(f) && (bits_of(f) & 0x400000) && std::signbit(f) == ((h & 0x8000) != 0),
              [&] { return "half " + hex(h) + " -> float " + hex(bits_of(f)); });
      t.check(back == (h | 0x200), [&] { return "NaN half " + hex(h) + " came back as " + hex(back); });
    } else {
      t.check(static_cast<double>(f) == reference_value(h) && std::signbit(f) == ((h & 0x8000) != 0),
              [&] { return "half " + hex(h) + " -> float " + hex(bits_of(f)); });
      t.check(back == h, [&] { return "half " + hex(h) + " came back as " + hex(back); });
    }
  }
  REQUIRE(t.bad == 0);
}

TEST_CASE("float -> half matches the reference for every float exponent", "[half]") {
  std::mt19937 rng(20240601);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7fffff);
  // Around the 13 bits float -> half drops: below, at and above its halfway point.
  const uint32_t edges[] = {0, 1, 2, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7ff000, 0x7fffff};
  Tally t;
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t sign : {0u, 0x80000000u}) {
      for (uint32_t m : edges) check_from_float(t, float_of(sign | (e << 23) | m));
      for (int i = 0; i < 300; ++i) check_from_float(t, float_of(sign | (e << 23) | mantissa(rng)));
    }
  REQUIRE(t.bad == 0);
}

TEST_CASE("float -> half matches the reference over a stride of all floats", "[half]") {
  Tally t;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) check_from_float(t, float_of(static_cast<uint32_t>(u)));
  REQUIRE(t.bad == 0);
}

TEST_CASE("half ties round to even, and just off a tie rounds to the nearer side", "[half]") {
  // Every midpoint between neighbouring halves (12 significant bits) is exact in float.
  Tally t;
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    const double lo = unbounded_value(static_cast<uint16_t>(b));
    const double hi = unbounded_value(static_cast<uint16_t>(b + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    const auto even = static_cast<uint16_t>(b % 2 == 0 ? b : b + 1);
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const float s = sign ? -1.0f : 1.0f;
      t.check(h16(s * mid) == (sign | even), [&] { return "tie above " + hex(b) + " gave " + hex(h16(s * mid)); });
      t.check(h16(s * std::nextafter(mid, 0.0f)) == (sign | b), [&] { return "below tie above " + hex(b); });
      t.check(h16(s * std::nextafter(mid, HUGE_VALF)) == (sign | (b + 1)), [&] { return "above tie above " + hex(b); });
    }
  }
  REQUIRE(t.bad == 0);
}

TEST_CASE("half overflow boundary", "[half]") {
  CHECK(h16(65504.0f) == 0x7bff);
  CHECK(h16(65519.99f) == 0x7bff);
  CHECK(h16(65519.996f) == 0x7bff);
  CHECK(h16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(h16(65520.0f) == 0x7c00);
  CHECK(h16(-65520.0f) == 0xfc00);
  CHECK(h16(65536.0f) == 0x7c00);
  CHECK(h16(1e5f) == 0x7c00);
  CHECK(h16(std::numeric_limits<float>::max()) == 0x7c00);
  CHECK(h16(HUGE_VALF) == 0x7c00);
  CHECK(h16(-HUGE_VALF) == 0xfc00);
}

TEST_CASE("half subnormals and underflow", "[half]") {
  CHECK(h16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(h16(std::ldexp(1.0f, -25)) == 0x0000);  // tie between 0 and 2^-24: even is 0
  CHECK(h16(-std::ldexp(1.0f, -25)) == 0x8000);
  CHECK(h16(std::ldexp(1.0000001f, -25)) == 0x0001);
  CHECK(h16(std::ldexp(3.0f, -26)) == 0x0001);  // 0.75 units
  CHECK(h16(std::ldexp(5.0f, -26)) == 0x0001);  // 1.25 units
  CHECK(h16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 units: tie, to even 2
  CHECK(h16(std::ldexp(5.0f, -25)) == 0x0002);  // 2.5 units: tie, to even 2
  CHECK(h16(std::ldexp(1023.0f, -24)) == 0x03ff);
  CHECK(h16(std::ldexp(2047.0f, -25)) == 0x0400);  // 1023.5 units: tie, to even 1024 = 2^-14
  CHECK(h16(std::ldexp(1.0f, -14)) == 0x0400);
  CHECK(h16(std::nextafter(std::ldexp(1.0f, -14), 0.0f)) == 0x0400);
  CHECK(h16(1e-8f) == 0x0000);
  CHECK(h16(-1e-8f) == 0x8000);
  CHECK(h16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(hg::half_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(hg::half_bits_to_float(0x8001) == -std::ldexp(1.0f, -24));
  CHECK(hg::half_bits_to_float(0x03ff) == std::ldexp(1023.0f, -24));
}

TEST_CASE("half zeros, infinities and NaNs", "[half]") {
  CHECK(h16(0.0f) == 0x0000);
  CHECK(h16(-0.0f) == 0x8000);
  CHECK(std::signbit(hg::half_bits_to_float(0x8000)));
  CHECK(hg::half_bits_to_float(0x7c00) == HUGE_VALF);
  CHECK(hg::half_bits_to_float(0xfc00) == -HUGE_VALF);
  CHECK(h16(std::numeric_limits<float>::quiet_NaN()) == 0x7e00);
  CHECK(h16(-std::numeric_limits<float>::quiet_NaN()) == 0xfe00);
  // Payloads below the 10 bits a half keeps would truncate to the inf pattern: the quiet bit
  // keeps them NaN.
  CHECK(h16(float_of(0x7f800001)) == 0x7e00);
  CHECK(h16(float_of(0xff801fff)) == 0xfe00);
  CHECK(h16(float_of(0x7fc12345)) == 0x7e09);  // the top 10 payload bits survive
  CHECK(hg::double_to_half_bits(std::bit_cast<double>(0x7ff0000000000001ull)) == 0x7e00);
  CHECK(hg::double_to_half_bits(-std::numeric_limits<double>::quiet_NaN()) == 0xfe00);
  CHECK(bits_of(hg::half_bits_to_float(0x7d00)) == 0x7fe00000u);  // signaling half comes back quiet
}

TEST_CASE("double -> half rounds once, straight from the double", "[half]") {
  // 1 + 2^-11 is the tie between 1 and 1 + 2^-10; 2^-30 above it the answer is 1 + 2^-10.
  // Through float the 2^-30 is lost first and the tie then goes to even, 1.
  const double d = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30);
  CHECK(hg::double_to_half_bits(d) == 0x3c01);
  CHECK(hg::float_to_half_bits(static_cast<float>(d)) == 0x3c00);
  CHECK(half(d).bits == 0x3c01);
  CHECK(hg::double_to_half_bits(std::nextafter(65520.0, 0.0)) == 0x7bff);
  CHECK(hg::double_to_half_bits(65520.0) == 0x7c00);
  CHECK(hg::double_to_half_bits(1e300) == 0x7c00);
  CHECK(hg::double_to_half_bits(-HUGE_VAL) == 0xfc00);
  CHECK(hg::double_to_half_bits(std::ldexp(1.0, -25)) == 0x0000);
  CHECK(hg::double_to_half_bits(std::nextafter(std::ldexp(1.0, -25), 1.0)) == 0x0001);
  CHECK(hg::double_to_half_bits(-std::numeric_limits<double>::denorm_min()) == 0x8000);

  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> mantissa(0, (uint64_t{1} << 52) - 1);
  Tally t;
  for (uint64_t e = 1023 - 30; e <= 1023 + 17; ++e)
    for (uint64_t sign : {uint64_t{0}, uint64_t{1} << 63})
      for (int i = 0; i < 2000; ++i) check_from_double(t, std::bit_cast<double>(sign | (e << 52) | mantissa(rng)));
  for (uint64_t e : {uint64_t{0}, uint64_t{1}, uint64_t{500}, uint64_t{1500}, uint64_t{2046}})
    for (int i = 0; i < 100; ++i) check_from_double(t, std::bit_cast<double>((e << 52) | mantissa(rng)));
  // A float widened to double is the same value, so both entry points must agree.
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 65537) {
    const float f = float_of(static_cast<uint32_t>(u));
    if (!std::isnan(f))
      t.check(hg::double_to_half_bits(f) == hg::float_to_half_bits(f),
              [&] { return "float " + hex(u) + " via double"; });
  }
  REQUIRE(t.bad == 0);
}

TEST_CASE("numeric_limits<half>", "[half]") {
  using L = std::numeric_limits<half>;
  STATIC_REQUIRE(L::is_specialized);
  STATIC_REQUIRE(L::is_signed);
  STATIC_REQUIRE(L::has_infinity);
  STATIC_REQUIRE(L::has_quiet_NaN);
  STATIC_REQUIRE(L::has_denorm == std::denorm_present);
  STATIC_REQUIRE(L::digits == 11);
  STATIC_REQUIRE(L::digits10 == 3);
  STATIC_REQUIRE(L::max_digits10 == 5);
  STATIC_REQUIRE(L::radix == 2);
  STATIC_REQUIRE(L::min_exponent == -13);
  STATIC_REQUIRE(L::max_exponent == 16);
  const auto value = [](half h) { return static_cast<double>(h); };
  CHECK(value(L::min()) == std::ldexp(1.0, -14));
  CHECK(value(L::max()) == std::ldexp(2047.0, 5));
  CHECK(value(L::max()) == 65504.0);
  CHECK(value(L::lowest()) == -65504.0);
  CHECK(value(L::epsilon()) == std::ldexp(1.0, -10));
  CHECK(value(L::round_error()) == 0.5);
  CHECK(value(L::denorm_min()) == std::ldexp(1.0, -24));
  CHECK(value(L::infinity()) == HUGE_VAL);
  CHECK(std::isnan(value(L::quiet_NaN())));
  CHECK(half_is_nan(L::signaling_NaN().bits));
  CHECK((L::signaling_NaN().bits & 0x200) == 0);
  // epsilon is the gap after 1; min_exponent - 1 is min()'s exponent as frexp counts it.
  CHECK(value(L::epsilon()) == value(half::from_bits(0x3c01)) - 1.0);
  int e = 0;
  std::frexp(value(L::min()), &e);
  CHECK(e == L::min_exponent);
  std::frexp(value(L::max()), &e);
  CHECK(e == L::max_exponent);
}

TEST_CASE("bulk f16 <-> f32: F16C and portable paths give the scalar bits", "[half][bulk]") {
  if (!hg::cpu_has_f16c()) WARN("this CPU has no F16C: only the portable path is tested");

  std::vector<half> halves(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) halves[b] = half::from_bits(static_cast<uint16_t>(b));
  std::vector<float> fast(halves.size()), portable(halves.size());
  hg::convert_f16_to_f32(halves.data(), fast.data(), halves.size());
  hg::convert_f16_to_f32_portable(halves.data(), portable.data(), halves.size());
  Tally t;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint32_t want = bits_of(hg::half_bits_to_float(static_cast<uint16_t>(b)));
    t.check(bits_of(fast[b]) == want, [&] { return "dispatch: half " + hex(b) + " -> " + hex(bits_of(fast[b])); });
    t.check(bits_of(portable[b]) == want,
            [&] { return "portable: half " + hex(b) + " -> " + hex(bits_of(portable[b])); });
  }

  std::vector<float> floats;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) floats.push_back(float_of(static_cast<uint32_t>(u)));
  for (uint32_t u : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu, 0x7fa00000u, 0x477ff000u, 0x477fefffu,
                     0x33000000u, 0x33000001u, 0x38800000u, 0x387fffffu, 0x7f800000u, 0x80000000u})
    floats.push_back(float_of(u));
  std::vector<half> fast_h(floats.size()), portable_h(floats.size());
  hg::convert_f32_to_f16(floats.data(), fast_h.data(), floats.size());
  hg::convert_f32_to_f16_portable(floats.data(), portable_h.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    const uint16_t want = hg::float_to_half_bits(floats[i]);
    t.check(fast_h[i].bits == want,
            [&] { return "dispatch: float " + hex(bits_of(floats[i])) + " -> " + hex(fast_h[i].bits); });
    t.check(portable_h[i].bits == want,
            [&] { return "portable: float " + hex(bits_of(floats[i])) + " -> " + hex(portable_h[i].bits); });
  }
  REQUIRE(t.bad == 0);
}

TEST_CASE("bulk f16 conversions handle every tail length and write nothing past n", "[half][bulk]") {
  std::vector<float> src_f(40);
  std::vector<half> src_h(40);
  for (size_t i = 0; i < src_f.size(); ++i) {
    src_f[i] = std::ldexp(static_cast<float>(i) + 0.3f, static_cast<int>(i % 9) - 4) * (i % 2 ? -1.0f : 1.0f);
    src_h[i] = half(src_f[i]);
  }
  const uint16_t poison_h = 0x7d5a;
  const float poison_f = -123.25f;
  for (size_t offset : {size_t{0}, size_t{1}, size_t{3}})
    for (size_t n = 0; n + offset <= 36; ++n) {
      INFO("offset " << offset << ", n " << n);
      std::vector<half> out_h(40, half::from_bits(poison_h));
      std::vector<float> out_f(40, poison_f);
      hg::convert_f32_to_f16(src_f.data() + offset, out_h.data() + offset, n);
      hg::convert_f16_to_f32(src_h.data() + offset, out_f.data() + offset, n);
      for (size_t i = 0; i < 40; ++i) {
        const bool inside = i >= offset && i < offset + n;
        REQUIRE(out_h[i].bits == (inside ? hg::float_to_half_bits(src_f[i]) : poison_h));
        REQUIRE(bits_of(out_f[i]) == bits_of(inside ? hg::half_bits_to_float(src_h[i].bits) : poison_f));
      }
    }
}
