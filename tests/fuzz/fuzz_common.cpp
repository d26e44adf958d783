// Helpers shared by the fuzz areas: dtype precision, rounding through the library's IEEE
// conversion, random tensors and the tolerance comparison.
#include <sstream>

#include "tests/devices.h"
#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {

const std::vector<DType> kFloatTypes = {f64, f32, f16, bf16};

double unit_roundoff(DType dt) {
  return dt == f64 ? 0x1p-53 : dt == f32 ? 0x1p-24 : dt == f16 ? 0x1p-11 : 0x1p-8;
}

double smallest_subnormal(DType dt) {
  return dt == f64 ? 0x1p-1074 : dt == f32 ? 0x1p-149 : dt == f16 ? 0x1p-24 : 0x1p-133;
}

std::vector<double> rounded(const std::vector<double>& v, DType dt) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, {dt}).to_vector<double>();
}

Tensor random_tensor(Rng& rng, const Shape& shape, DType dt) {
  const int64_t n = numel_of(shape);
  // One tensor in eight has large values: f16 overflows past 65504.
  const double scale = rng.chance(0.125) ? 3e4 : 1.0;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = rng.normal() * scale;
  return from_vector(v, shape, {dt});
}

void expect_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& want,
                  const std::vector<double>& atol) {
  expect(got.size() == want.size(), what, ": ", got.size(), " values, the reference has ", want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const bool same_nonfinite = (std::isnan(g) && std::isnan(w)) || (std::isinf(w) && g == w);
    const bool close = std::isfinite(w) && std::isfinite(g) && std::abs(g - w) <= atol[i];
    expect(same_nonfinite || close, what, ": element ", i, " is ", g, ", the f64 reference says ", w,
           " (tolerance ", atol[i], ")");
  }
}

std::string shape_text(const Shape& s) { return shape_str(s); }

// A GPU, or the CPU emulation of one (which Device::automatic() never picks).
bool cuda_usable() {
  static const bool usable = test::cuda_available();
  return usable;
}

Device random_device(Rng& rng) { return rng.chance(0.04) ? Device::cuda(0) : Device::cpu(); }

}  // namespace hg::fuzz
