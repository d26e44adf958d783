// The kernel interface of random fills, implemented by every backend. Element i (in
// row-major order of out) uses Philox block i of `key`.
#pragma once
#include <array>
#include <cstdint>

#include "framework/dispatch.h"
#include "framework/generator.h"
#include "framework/tensor.h"
#include "ops/kernel_math.h"

namespace hg {

enum class Distribution : uint8_t {
  uniform,    // p0 + (p1 - p0) * U[0, 1)
  normal,     // p0 + p1 * N(0, 1) (Box-Muller on the block's first two words)
  integer,    // in [p0, p1)
  bernoulli,  // U[0, 1) < p0
};

extern DispatchStub<void(Distribution, const Tensor& out, PhiloxKey key, double p0, double p1)> random_stub;

// Element i's value from its Philox block w = philox4x32(key, i), before the one rounding
// into the output dtype; every backend's kernel calls this, so a seeded draw is the same
// tensor on every device. f64 outputs take 53 random bits for a uniform, others 24.
HG_HOST_DEVICE double philox_value(Distribution d, const std::array<uint32_t, 4>& w, bool f64_out, double p0,
                                   double p1) {
  switch (d) {
    case Distribution::uniform:
      return p0 + (p1 - p0) * (f64_out ? uniform_f64(w[0], w[1]) : double(uniform_f32(w[0])));
    case Distribution::normal: {
      // Box-Muller; 1 - U keeps the logarithm's argument in (0, 1].
      const double u = 1.0 - uniform_f64(w[0], w[1]), t = uniform_f64(w[2], w[3]);
      return p0 + p1 * math_sqrt(-2.0 * math_log(u)) * math_cos(6.283185307179586 * t);
    }
    case Distribution::integer: {
      const uint64_t range = static_cast<uint64_t>(p1 - p0), r = (uint64_t{w[0]} << 32) | w[1];
      return p0 + static_cast<double>(r % range);
    }
    case Distribution::bernoulli: return uniform_f64(w[0], w[1]) < p0 ? 1.0 : 0.0;
  }
  return 0;
}

}  // namespace hg
