// Division by a divisor fixed at launch, as a multiply-high and a shift: the convolution
// sources split a column index into (tap, channel) and a tap into (r, s) for every 16-byte
// chunk they stage, where a 64-bit division is a long software routine on the GPU. Exact for
// numerators below 2^31 (Granlund and Montgomery's round-up method); host-tested.
#pragma once
#include <cstdint>

#include "cuda/primitives/common.h"

namespace hg::cuda {

struct FastDivmod {
  uint32_t d = 1, mul = 0, shift = 0;

  FastDivmod() = default;
  // divisor in [1, 2^31).
  HG_HOST_DEVICE explicit FastDivmod(int64_t divisor) : d(static_cast<uint32_t>(divisor)) {
    if (d == 1) return;
    uint32_t log2_up = 0;  // ceil(log2(d)), >= 1 here
    while ((uint64_t{1} << log2_up) < d) ++log2_up;
    // m = ceil(2^(31 + l) / d) < 2^32 since d > 2^(l-1); q = (n * m) >> (31 + l).
    mul = static_cast<uint32_t>(((uint64_t{1} << (31 + log2_up)) + d - 1) / d);
    shift = log2_up - 1;
  }

  // n / d for n in [0, 2^31).
  HG_HOST_DEVICE uint32_t div(uint32_t n) const {
    return d == 1 ? n : static_cast<uint32_t>((uint64_t{n} * mul) >> 32) >> shift;
  }
  // q = n / d and r = n % d for n in [0, 2^31).
  HG_HOST_DEVICE void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * d;
  }
};

}  // namespace hg::cuda
