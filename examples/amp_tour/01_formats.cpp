// Tour step 1 (docs/amp.md): what f32, f16 and bf16 can hold. Each value is rounded by
// halfgrad's own conversion (.to(dtype)), so what prints is what a tensor stores.
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

namespace {

double in(DType dt, double x) { return tensor({x}).to(dt).to(f64).item<double>(); }

}  // namespace

int main() {
  const DType types[] = {f32, f16, bf16};
  std::printf("%-28s %14s %14s %14s\n", "", "f32", "f16", "bf16");
  auto row = [&](const char* what, auto value) {
    std::printf("%-28s", what);
    for (DType dt : types) std::printf(" %14.6g", value(dt));
    std::printf("\n");
  };
  row("largest finite", [](DType dt) { return dt == f32 ? 3.4028234663852886e38 : dt == f16 ? 65504.0 : 3.3895313892515355e38; });
  row("smallest normal", [](DType dt) { return dt == f16 ? 0x1p-14 : 0x1p-126; });
  row("smallest subnormal", [](DType dt) { return dt == f32 ? 0x1p-149 : dt == f16 ? 0x1p-24 : 0x1p-133; });
  row("ulp at 1.0", [](DType dt) { return dt == f32 ? 0x1p-23 : dt == f16 ? 0x1p-10 : 0x1p-7; });
  // The same facts, measured: round a value into each format and read it back.
  row("1 + 1e-4 stored", [](DType dt) { return in(dt, 1.0 + 1e-4); });
  row("1e-8 stored", [](DType dt) { return in(dt, 1e-8); });
  row("3e-8 stored (just over 2^-25)", [](DType dt) { return in(dt, 3e-8); });
  row("2^-25 stored (the tie)", [](DType dt) { return in(dt, 0x1p-25); });
  row("65519 stored", [](DType dt) { return in(dt, 65519.0); });
  row("65520 stored", [](DType dt) { return in(dt, 65520.0); });
  row("0.1 stored", [](DType dt) { return in(dt, 0.1); });
  row("256 + 1 stored", [](DType dt) { return in(dt, 257.0); });
  // Largest/smallest rows above are checked against the conversion too.
  std::printf("check: f16 65504 -> %g, 2^-24 -> %g, bf16 2^-133 -> %g\n", in(f16, 65504.0), in(f16, 0x1p-24),
              in(bf16, 0x1p-133));
  return 0;
}
