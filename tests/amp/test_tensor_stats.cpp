// The f16-range statistics of one tensor against counts computed here from the
// definitions (f16 normal range 2^-14, flush at or below 2^-25, max 65504).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("tensor_stats counts what f16 would do with each value", "[amp][stats]") {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0, 1e-9, 1e-6, 1.0, 70000.0, inf, std::nan(""), -2.0};
  Tensor x = from_data(v, {8}, {f64});
  amp::TensorStats s = amp::tensor_stats(x);
  CHECK(s.numel == 8);
  CHECK(s.zeros == 1);
  CHECK(s.f16_subnormal == 2);  // 1e-9 and 1e-6 are below 2^-14 ~ 6.1e-5
  CHECK(s.f16_flush == 1);      // only 1e-9 is below 2^-25 ~ 3e-8
  CHECK(s.f16_overflow == 1);
  CHECK(s.inf == 1);
  CHECK(s.nan == 1);
  CHECK(s.amax == 70000.0);
  CHECK(s.min_nonzero == 1e-9);
  CHECK(s.mean == Approx((1e-9 + 1e-6 + 1.0 + 70000.0 - 2.0) / 6.0));
  CHECK(s.l2 == Approx(std::sqrt(1e-18 + 1e-12 + 1.0 + 4.9e9 + 4.0)));
  auto bin = [&](double a) { return static_cast<size_t>(std::floor(std::log2(a)) - amp::TensorStats::hist_lo); };
  CHECK(s.hist[bin(1e-9)] == 1);
  CHECK(s.hist[bin(1e-6)] == 1);
  CHECK(s.hist[bin(1.0)] == 1);
  CHECK(s.hist[bin(2.0)] == 1);
  CHECK(s.hist[bin(70000.0)] == 1);
  int64_t total = 0;
  for (int64_t h : s.hist) total += h;
  CHECK(total == 5);  // the finite non-zero values
}

TEST_CASE("tensor_stats clamps the exponent histogram and agrees with a direct count on a large tensor", "[amp][stats]") {
  Generator g(11);
  Tensor x = mul(randn({300, 701}, {f32}, &g), 1e-5);  // big enough for the threaded path
  std::vector<double> v = x.to_vector<double>();
  int64_t sub = 0, flush = 0, zeros = 0;
  double amax = 0;
  for (double a : v) {
    a = std::fabs(a);
    zeros += a == 0;
    sub += a > 0 && a < std::ldexp(1.0, -14);
    flush += a > 0 && a <= std::ldexp(1.0, -25);
    amax = std::max(amax, a);
  }
  amp::TensorStats s = amp::tensor_stats(x);
  CHECK(s.f16_subnormal == sub);
  CHECK(s.f16_flush == flush);
  CHECK(s.zeros == zeros);
  CHECK(s.amax == amax);
  CHECK(sub > 0);

  Tensor extremes = from_data(std::vector<float>{1e-30f, 1e30f}, {2}, {f32});
  amp::TensorStats e = amp::tensor_stats(extremes);
  CHECK(e.hist.front() == 1);  // 2^-100 lands in the lowest bin
  CHECK(e.hist.back() == 1);   // 2^99 in the highest
}

TEST_CASE("tensor_stats counts 2^-25 itself as a flush, as f16 rounding does", "[amp][stats]") {
  // 2^-25 is the tie between 0 and 2^-24 and rounds to the even 0; the next double above
  // it rounds up to 2^-24. The reference is the f16 cast itself.
  const std::vector<double> v = {0x1p-26, 0x1p-25, std::nextafter(0x1p-25, 1.0), 0x1.8p-25};
  Tensor x = from_data(v, {4}, {f64});
  const amp::TensorStats s = amp::tensor_stats(x);
  const std::vector<double> rounded = x.to(f16).to_vector<double>();
  int64_t zero_in_f16 = 0;
  for (double r : rounded) zero_in_f16 += r == 0;
  CHECK(zero_in_f16 == 2);
  CHECK(s.f16_flush == zero_in_f16);
  CHECK(s.f16_subnormal == 4);
}

TEST_CASE("tensor_stats of an f16 tensor sees its rounded values", "[amp][stats]") {
  // 1e-8 rounds to 0 in f16 (below 2^-25): a zero, not a flush candidate any more.
  Tensor x = from_data(std::vector<float>{1e-8f, 1e-6f, 1.0f}, {3}, {f32}).to(f16);
  amp::TensorStats s = amp::tensor_stats(x);
  CHECK(s.zeros == 1);
  CHECK(s.f16_subnormal == 1);
  CHECK(s.f16_flush == 0);
  CHECK_THROWS_WITH(amp::tensor_stats(zeros({2}, {i64})), Catch::Contains("floating"));
}
