// Helpers of the cuda op tests: fresh random inputs made on the CPU, poisoned outputs, and
// the comparison of a cuda result with the CPU kernel's result under a per-dtype tolerance.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "halfgrad.h"
#include "tests/devices.h"

namespace hg::test {

inline const Device kCuda = Device::cuda(0);

// Values in [lo, hi) in `dt`, different for every seed; never all zeros.
inline Tensor random_input(const Shape& s, DType dt, uint64_t seed, double lo = -3, double hi = 3) {
  Generator g(seed);
  return uniform(s, lo, hi, {f64}, &g).to(dt);
}

// A cuda tensor full of NaN (or the largest value for integer dtypes), so that an element a
// kernel forgets to write cannot pass as right.
inline Tensor poisoned(const Shape& s, DType dt) {
  return full(s, is_floating(dt) ? NAN : (dt == b8 ? 1.0 : -7777.0), {dt, kCuda});
}

// Relative tolerance for one dtype: a few units in the last place (transcendentals may
// differ by an ulp between the CPU's libm and the device's).
inline double tolerance(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-12;
    case DType::f32: return 2e-6;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
    default: return 0;
  }
}

// The cuda result equals the CPU's within the dtype's tolerance, NaN where it has NaN:
// |cuda - cpu| <= tol (|cpu| + magnitude), magnitude being the scale of values whose
// cancellation (sums in another order) can leave a small result.
inline void require_same(const Tensor& on_cuda, const Tensor& on_cpu, double magnitude = 1e-3) {
  REQUIRE(on_cuda.device() == kCuda);
  REQUIRE(on_cuda.dtype() == on_cpu.dtype());
  REQUIRE(on_cuda.shape() == on_cpu.shape());
  const double rtol = tolerance(on_cpu.dtype());
  const std::vector<double> a = on_cuda.to(Device::cpu()).to_vector<double>();
  const std::vector<double> b = on_cpu.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << " of " << shape_str(on_cpu.shape()) << " " << dtype_name(on_cpu.dtype()) << ": cuda "
                    << a[i] << ", cpu " << b[i]);
    if (std::isnan(b[i])) {
      REQUIRE(std::isnan(a[i]));
    } else if (std::isinf(b[i])) {
      REQUIRE(a[i] == b[i]);
    } else {
      REQUIRE(std::abs(a[i] - b[i]) <= rtol * (std::abs(b[i]) + magnitude));
    }
  }
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> d{f64, f32, f16, bf16};
  return d;
}

}  // namespace hg::test
