// Tour step 2 (docs/amp.md): a gradient of 1e-8 flushes to 0 in f16; multiplied by a
// loss scale S first it survives, and dividing by S in f32 is exact because S is a
// power of two (only the exponent changes).
#include <cmath>
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

int main() {
  const double g = 1e-8;
  const Tensor g16 = tensor({g}).to(f16);
  std::printf("gradient %g stored in f16: %g\n", g, g16.to(f64).item<double>());
  for (double S : {1024.0, 65536.0}) {
    const Tensor scaled = mul(tensor({g}), S).to(f16);  // what backward stores in f16
    const double s16 = scaled.to(f64).item<double>();
    const Tensor unscaled = mul(scaled.to(f32), 1.0 / S);  // GradScaler::unscale_, in f32
    const double u = unscaled.to(f64).item<double>();
    std::printf("x %-6g: f16 holds %.6g (%s), unscaled in f32 %.8g, relative error %.2g\n", S, s16,
                s16 < 0x1p-14 ? "subnormal: fewer bits" : "normal: 11 bits", u, std::fabs(u - g) / g);
    std::printf("         unscale exact: %s (f16 value / S in f64 = %.17g)\n", u == s16 / S ? "yes" : "no", s16 / S);
  }
  // Unscaling in f16 instead would flush the small gradients again.
  const double back16 = mul(mul(tensor({g}), 65536.0).to(f16), 1.0 / 65536.0).to(f64).item<double>();
  std::printf("unscaled in f16 instead: %g\n", back16);
  return 0;
}
