// hg::bfloat16 against an independent model of the format (ldexp decoding, rounding by
// locating the neighbouring representable values), plus the bulk conversions.
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

#include "framework/bfloat16.h"
#include "framework/half_convert.h"
#include "tests/framework/format16_reference.h"

using hg::bfloat16;

namespace {

using namespace hg::test;

bool bf16_is_nan(uint16_t b) { return kBfloat16.is_nan(b); }
double unbounded_value(uint16_t b) { return kBfloat16.unbounded_value(b); }
double reference_value(uint16_t b) { return kBfloat16.value(b); }

const RoundingReference& reference() {
  static const RoundingReference r(kBfloat16);
  return r;
}

void check_from_float(Tally& t, float f) { check_float_conversion(t, reference(), kBfloat16, f, hg::float_to_bf16_bits(f)); }
void check_from_double(Tally& t, double d) { check_double_conversion(t, reference(), d, hg::double_to_bf16_bits(d)); }

uint16_t b16(float f) { return hg::float_to_bf16_bits(f); }

}  // namespace

TEST_CASE("bfloat16 is a 2-byte trivially copyable standard-layout value", "[bfloat16]") {
  STATIC_REQUIRE(sizeof(bfloat16) == 2);
  STATIC_REQUIRE(std::is_trivially_copyable_v<bfloat16>);
  STATIC_REQUIRE(std::is_standard_layout_v<bfloat16>);
  STATIC_REQUIRE(!std::is_convertible_v<float, bfloat16>);
  STATIC_REQUIRE(!std::is_convertible_v<bfloat16, float>);
  STATIC_REQUIRE(bfloat16(1.0f).bits == 0x3f80);
  CHECK(bfloat16().bits == 0);
  CHECK(bfloat16(-2.0f).bits == 0xc000);
  CHECK(bfloat16(0.1).bits == 0x3dcd);  // 0.10009765625, the nearest bf16 to 0.1
  CHECK(static_cast<double>(bfloat16::from_bits(0x3dcd)) == 0.10009765625);
  CHECK(static_cast<float>(bfloat16::from_bits(0x4049)) == 3.140625f);
}

TEST_CASE("every bf16 decodes to its value and survives float -> bf16", "[bfloat16]") {
  Tally t;
  for (uint32_t u = 0; u < 0x10000; ++u) {
    const auto b = static_cast<uint16_t>(u);
    const float f = hg::bf16_bits_to_float(b);
    const uint16_t back = hg::float_to_bf16_bits(f);
    if (bf16_is_nan(b)) {
      // A signaling NaN is quieted on the way to float; sign and payload are kept.
      t.check(bits_of(f) == ((uint32_t{b} << 16) | 0x400000u),
              [&] { return "bf16 " + hex(b) + " -> " + hex(bits_of(f)); });
      t.check(back == (b | 0x40), [&] { return "NaN bf16 " + hex(b) + " came back as " + hex(back); });
    } else {
      t.check(static_cast<double>(f) == reference_value(b) && std::signbit(f) == ((b & 0x8000) != 0),
              [&] { return "bf16 " + hex(b) + " -> float " + hex(bits_of(f)); });
      t.check(back == b, [&] { return "bf16 " + hex(b) + " came back as " + hex(back); });
    }
  }
  REQUIRE(t.bad == 0);
}

TEST_CASE("float -> bf16 matches the reference for every float exponent", "[bfloat16]") {
  std::mt19937 rng(20240602);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7fffff);
  // Around the 16 bits float -> bf16 drops: below, at and above its halfway point.
  const uint32_t edges[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x10000, 0x18000, 0x7f8000, 0x7fffff};
  Tally t;
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t sign : {0u, 0x80000000u}) {
      for (uint32_t m : edges) check_from_float(t, float_of(sign | (e << 23) | m));
      for (int i = 0; i < 300; ++i) check_from_float(t, float_of(sign | (e << 23) | mantissa(rng)));
    }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) check_from_float(t, float_of(static_cast<uint32_t>(u)));
  REQUIRE(t.bad == 0);
}

TEST_CASE("bf16 ties round to even, and just off a tie rounds to the nearer side", "[bfloat16]") {
  // Every midpoint between neighbouring bf16 values (9 significant bits) is exact in float.
  Tally t;
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    const double lo = unbounded_value(static_cast<uint16_t>(b));
    const double hi = unbounded_value(static_cast<uint16_t>(b + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    const auto even = static_cast<uint16_t>(b % 2 == 0 ? b : b + 1);
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const float s = sign ? -1.0f : 1.0f;
      t.check(b16(s * mid) == (sign | even), [&] { return "tie above " + hex(b) + " gave " + hex(b16(s * mid)); });
      t.check(b16(s * std::nextafter(mid, 0.0f)) == (sign | b), [&] { return "below tie above " + hex(b); });
      t.check(b16(s * std::nextafter(mid, HUGE_VALF)) == (sign | (b + 1)), [&] { return "above tie above " + hex(b); });
    }
  }
  REQUIRE(t.bad == 0);
}

TEST_CASE("bf16 overflow, subnormals, zeros and NaNs", "[bfloat16]") {
  const float max_bf16 = std::ldexp(255.0f, 120);
  const float last_tie = std::ldexp(511.0f, 119);  // midpoint between max_bf16 and 2^128
  CHECK(b16(max_bf16) == 0x7f7f);
  CHECK(b16(std::nextafter(last_tie, 0.0f)) == 0x7f7f);
  CHECK(b16(last_tie) == 0x7f80);
  CHECK(b16(-last_tie) == 0xff80);
  CHECK(b16(std::numeric_limits<float>::max()) == 0x7f80);  // float's max lies past the last tie
  CHECK(b16(HUGE_VALF) == 0x7f80);
  CHECK(b16(-HUGE_VALF) == 0xff80);

  CHECK(b16(std::ldexp(1.0f, -133)) == 0x0001);
  CHECK(b16(std::ldexp(1.0f, -134)) == 0x0000);  // tie between 0 and 2^-133: even is 0
  CHECK(b16(std::ldexp(3.0f, -134)) == 0x0002);  // 1.5 units: tie, to even 2
  CHECK(b16(std::ldexp(3.0f, -135)) == 0x0001);  // 0.75 units
  CHECK(b16(std::ldexp(1.0f, -126)) == 0x0080);
  CHECK(b16(std::ldexp(255.0f, -134)) == 0x0080);  // 127.5 units: tie, to even 128 = 2^-126
  CHECK(b16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(b16(-std::numeric_limits<float>::denorm_min()) == 0x8000);
  CHECK(hg::bf16_bits_to_float(0x0001) == std::ldexp(1.0f, -133));

  CHECK(b16(0.0f) == 0x0000);
  CHECK(b16(-0.0f) == 0x8000);
  CHECK(std::signbit(hg::bf16_bits_to_float(0x8000)));
  // Rounding the bits of these NaNs would carry into inf, or past the exponent into the sign.
  CHECK(b16(float_of(0x7f800001)) == 0x7fc0);
  CHECK(b16(float_of(0x7f808000)) == 0x7fc0);
  CHECK(b16(float_of(0x7fffffff)) == 0x7fff);
  CHECK(b16(float_of(0xffffffff)) == 0xffff);
  CHECK(b16(float_of(0xff800001)) == 0xffc0);
  CHECK(b16(float_of(0x7fa12345)) == 0x7fe1);  // top payload bits survive, quiet bit set
  CHECK(bits_of(hg::bf16_bits_to_float(0x7fa0)) == 0x7fe00000u);
  CHECK(hg::double_to_bf16_bits(std::numeric_limits<double>::quiet_NaN()) == 0x7fc0);
  CHECK(hg::double_to_bf16_bits(std::bit_cast<double>(0xfff0000000000001ull)) == 0xffc0);
}

TEST_CASE("double -> bf16 rounds once, straight from the double", "[bfloat16]") {
  // 1 + 2^-8 is the tie between 1 and 1 + 2^-7; 2^-40 above it the answer is 1 + 2^-7.
  // Through float the 2^-40 is lost first and the tie then goes to even, 1.
  const double d = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  CHECK(hg::double_to_bf16_bits(d) == 0x3f81);
  CHECK(hg::float_to_bf16_bits(static_cast<float>(d)) == 0x3f80);
  CHECK(bfloat16(d).bits == 0x3f81);
  const double last_tie = std::ldexp(511.0, 119);
  CHECK(hg::double_to_bf16_bits(std::nextafter(last_tie, 0.0)) == 0x7f7f);
  CHECK(hg::double_to_bf16_bits(last_tie) == 0x7f80);
  CHECK(hg::double_to_bf16_bits(-1e300) == 0xff80);
  CHECK(hg::double_to_bf16_bits(std::ldexp(1.0, -134)) == 0x0000);
  CHECK(hg::double_to_bf16_bits(std::nextafter(std::ldexp(1.0, -134), 1.0)) == 0x0001);
  CHECK(hg::double_to_bf16_bits(-std::numeric_limits<double>::denorm_min()) == 0x8000);

  std::mt19937_64 rng(11);
  std::uniform_int_distribution<uint64_t> mantissa(0, (uint64_t{1} << 52) - 1);
  Tally t;
  for (uint64_t e = 1023 - 140; e <= 1023 + 130; e += 1)
    for (uint64_t sign : {uint64_t{0}, uint64_t{1} << 63})
      for (int i = 0; i < 200; ++i) check_from_double(t, std::bit_cast<double>(sign | (e << 52) | mantissa(rng)));
  for (uint64_t e : {uint64_t{0}, uint64_t{1}, uint64_t{500}, uint64_t{1500}, uint64_t{2046}})
    for (int i = 0; i < 100; ++i) check_from_double(t, std::bit_cast<double>((e << 52) | mantissa(rng)));
  // A float widened to double is the same value, so both entry points must agree.
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 65537) {
    const float f = float_of(static_cast<uint32_t>(u));
    if (!std::isnan(f))
      t.check(hg::double_to_bf16_bits(f) == hg::float_to_bf16_bits(f),
              [&] { return "float " + hex(u) + " via double"; });
  }
  REQUIRE(t.bad == 0);
}

TEST_CASE("numeric_limits<bfloat16>", "[bfloat16]") {
  using L = std::numeric_limits<bfloat16>;
  STATIC_REQUIRE(L::is_specialized);
  STATIC_REQUIRE(L::is_signed);
  STATIC_REQUIRE(L::has_infinity);
  STATIC_REQUIRE(L::has_quiet_NaN);
  STATIC_REQUIRE(L::has_denorm == std::denorm_present);
  STATIC_REQUIRE(L::digits == 8);
  STATIC_REQUIRE(L::digits10 == 2);
  STATIC_REQUIRE(L::max_digits10 == 4);
  STATIC_REQUIRE(L::radix == 2);
  STATIC_REQUIRE(L::min_exponent == std::numeric_limits<float>::min_exponent);
  STATIC_REQUIRE(L::max_exponent == std::numeric_limits<float>::max_exponent);
  const auto value = [](bfloat16 b) { return static_cast<double>(b); };
  CHECK(value(L::min()) == std::ldexp(1.0, -126));
  CHECK(value(L::max()) == std::ldexp(255.0, 120));
  CHECK(static_cast<float>(L::max()) == Approx(3.38953139e38f).epsilon(1e-8));
  CHECK(value(L::lowest()) == -std::ldexp(255.0, 120));
  CHECK(value(L::epsilon()) == std::ldexp(1.0, -7));
  CHECK(value(L::round_error()) == 0.5);
  CHECK(value(L::denorm_min()) == std::ldexp(1.0, -133));
  CHECK(value(L::infinity()) == HUGE_VAL);
  CHECK(std::isnan(value(L::quiet_NaN())));
  CHECK(bf16_is_nan(L::signaling_NaN().bits));
  CHECK((L::signaling_NaN().bits & 0x40) == 0);
  CHECK(value(L::epsilon()) == value(bfloat16::from_bits(0x3f81)) - 1.0);
  int e = 0;
  std::frexp(value(L::min()), &e);
  CHECK(e == L::min_exponent);
  std::frexp(value(L::max()), &e);
  CHECK(e == L::max_exponent);
}

TEST_CASE("bulk bf16 <-> f32 gives the scalar bits", "[bfloat16][bulk]") {
  std::vector<bfloat16> values(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) values[b] = bfloat16::from_bits(static_cast<uint16_t>(b));
  std::vector<float> widened(values.size());
  hg::convert_bf16_to_f32(values.data(), widened.data(), values.size());
  Tally t;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint32_t want = bits_of(hg::bf16_bits_to_float(static_cast<uint16_t>(b)));
    t.check(bits_of(widened[b]) == want, [&] { return "bf16 " + hex(b) + " -> " + hex(bits_of(widened[b])); });
  }

  std::vector<float> floats;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) floats.push_back(float_of(static_cast<uint32_t>(u)));
  for (uint32_t u : {0x7f800001u, 0x7fffffffu, 0xffffffffu, 0x7f7fffffu, 0x7f7f8000u, 0x00008000u, 0x00018000u})
    floats.push_back(float_of(u));
  for (size_t n : {floats.size(), size_t{0}, size_t{1}, size_t{7}, size_t{33}}) {
    std::vector<bfloat16> narrowed(floats.size() + 1, bfloat16::from_bits(0x1234));
    hg::convert_f32_to_bf16(floats.data(), narrowed.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t want = hg::float_to_bf16_bits(floats[i]);
      t.check(narrowed[i].bits == want,
              [&] { return "float " + hex(bits_of(floats[i])) + " -> " + hex(narrowed[i].bits); });
    }
    t.check(narrowed[n].bits == 0x1234, [&] { return "wrote past n = " + std::to_string(n); });
  }
  REQUIRE(t.bad == 0);
}

TEST_CASE("bulk f32 -> bf16 keeps NaN lanes quiet and rounds the others, for every NaN lane mask", "[bfloat16][bulk]") {
  // The vector store blends truncated NaN lanes into rounded ones; each of the 256 masks
  // puts signaling and quiet NaNs (payloads that would carry if rounded) among ties,
  // carries into the exponent, overflow and subnormals.
  const uint32_t nans[4] = {0x7f80ffffu, 0xffffffffu, 0x7fc08000u, 0x7f807fffu};
  const uint32_t others[8] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x00008000u,
                              0x80018000u, 0x3f7fffffu, 0xff7f8000u, 0x00000000u};
  std::vector<float> floats;
  for (uint32_t mask = 0; mask < 256; ++mask)
    for (uint32_t lane = 0; lane < 8; ++lane)
      floats.push_back(float_of(mask >> lane & 1 ? nans[(mask + lane) % 4] : others[(mask + lane) % 8]));
  std::vector<bfloat16> narrowed(floats.size());
  hg::convert_f32_to_bf16(floats.data(), narrowed.data(), floats.size());
  Tally t;
  for (size_t i = 0; i < floats.size(); ++i) {
    const uint16_t want = hg::float_to_bf16_bits(floats[i]);
    t.check(narrowed[i].bits == want, [&] { return "float " + hex(bits_of(floats[i])) + " -> " + hex(narrowed[i].bits); });
  }
  REQUIRE(t.bad == 0);
}
