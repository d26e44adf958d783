// FastDivmod (cuda/fast_divmod.h) against the hardware's division: every divisor up to 300
// on a spread of numerators, powers of two, large divisors, and the ends of [0, 2^31).
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/fast_divmod.h"

using hg::cuda::FastDivmod;

namespace {
// Counts numerators where q or r differs from / and %.
int64_t mismatches(uint32_t d, const std::vector<uint32_t>& numerators) {
  const FastDivmod f(d);
  int64_t bad = 0;
  for (uint32_t n : numerators) {
    uint32_t q = 0, r = 0;
    f.divmod(n, q, r);
    bad += q != n / d || r != n % d;
  }
  return bad;
}
}  // namespace

TEST_CASE("FastDivmod equals / and % for numerators below 2^31", "[cuda][indexing]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, 0x7fffffffu);
  std::vector<uint32_t> numerators;
  for (uint32_t n = 0; n < 5000; ++n) numerators.push_back(n);
  for (int i = 0; i < 5000; ++i) numerators.push_back(any(rng));
  for (uint32_t n = 0x7fffffffu - 5000; n != 0x80000000u; ++n) numerators.push_back(n);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int k = 9; k < 31; ++k) divisors.push_back(uint32_t{1} << k), divisors.push_back((uint32_t{1} << k) + 1),
      divisors.push_back((uint32_t{1} << k) - 1);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + any(rng) % 0x7ffffffeu);
  for (uint32_t d : divisors) {
    INFO("divisor " << d);
    // Numerators that are multiples of d, and one less: where a rounding error would show.
    std::vector<uint32_t> edges = numerators;
    for (uint64_t m = d; m < 0x80000000u && edges.size() < numerators.size() + 4000; m += d * uint64_t{997})
      edges.push_back(static_cast<uint32_t>(m)), edges.push_back(static_cast<uint32_t>(m - 1));
    REQUIRE(mismatches(d, edges) == 0);
  }
}
