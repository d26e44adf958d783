// What one tensor looks like through the eyes of f16: magnitude range, how many values
// are subnormal, would flush to zero or overflow, and a log2 exponent histogram. The
// statistics are computed on the tensor's device and read back only when asked.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "framework/tensor.h"
#include "ops/amp_kernels.h"

namespace hg::amp {

struct TensorStats {
  int64_t numel = 0;
  double amax = 0;         // largest finite |x|
  double min_nonzero = 0;  // smallest finite non-zero |x| (0 when there is none)
  double l2 = 0;           // over the finite values
  double mean = 0;         // over the finite values
  int64_t zeros = 0;
  int64_t f16_subnormal = 0;  // 0 < |x| < 2^-14: f16 keeps them with fewer significant bits
  int64_t f16_flush = 0;      // 0 < |x| <= 2^-25: become 0 when rounded to f16 (2^-25 is the tie to even 0)
  int64_t f16_overflow = 0;   // finite |x| > 65504: beyond the f16 range
  int64_t inf = 0;
  int64_t nan = 0;
  // hist[i]: finite non-zero values with floor(log2 |x|) = i - 40, clamped to -40 ... 20.
  std::array<int64_t, kNumericsBins> hist{};

  static constexpr int hist_lo = kNumericsHistLo;
  int64_t nonfinite() const { return inf + nan; }
  double fraction(int64_t count) const { return numel ? static_cast<double>(count) / static_cast<double>(numel) : 0.0; }
  std::string json() const;  // one JSON object
};

// Starts the computation on x's device; the result is an f64 [kNumericsFields] tensor
// there. No host synchronisation.
Tensor compute_stats(const Tensor& x);
// Reads a packed result back (synchronises with its device).
TensorStats unpack_stats(const Tensor& packed);
inline TensorStats tensor_stats(const Tensor& x) { return unpack_stats(compute_stats(x)); }

}  // namespace hg::amp
