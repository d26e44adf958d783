// Tour step 1 (docs/amp.md): what f32, f16 and bf16 can hold. The limits are decoded from
// bit patterns; each value below them is rounded by halfgrad's own conversion
// (.to(dtype)), so what prints is what a tensor stores.
#include <bit>
#include <cstdint>
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

namespace {

double in(DType dt, double x) { return tensor({x}).to(dt).to(f64).item<double>(); }

// The value of a bit pattern in each format.
double decode(DType dt, uint32_t f32_bits, uint16_t f16_bits, uint16_t bf16_bits) {
  if (dt == f32) return std::bit_cast<float>(f32_bits);
  if (dt == f16) return static_cast<double>(half::from_bits(f16_bits));
  return static_cast<double>(bfloat16::from_bits(bf16_bits));
}

}  // namespace

int main() {
  const DType types[] = {f32, f16, bf16};
  std::printf("%-28s %14s %14s %14s\n", "", "f32", "f16", "bf16");
  auto row = [&](const char* what, auto value) {
    std::printf("%-28s", what);
    for (DType dt : types) std::printf(" %14.6g", value(dt));
    std::printf("\n");
  };
  // The limits, decoded from bit patterns: the largest finite value has an all-ones
  // exponent minus one and an all-ones fraction; the smallest subnormal is the pattern 1.
  row("largest finite", [](DType dt) { return decode(dt, 0x7f7fffff, 0x7bff, 0x7f7f); });
  row("smallest normal", [](DType dt) { return decode(dt, 0x00800000, 0x0400, 0x0080); });
  row("smallest subnormal", [](DType dt) { return decode(dt, 0x00000001, 0x0001, 0x0001); });
  row("ulp at 1.0", [](DType dt) { return decode(dt, 0x3f800001, 0x3c01, 0x3f81) - 1.0; });
  // The same facts, measured: round a value into each format and read it back.
  row("1 + 1e-4 stored", [](DType dt) { return in(dt, 1.0 + 1e-4); });
  row("1e-8 stored", [](DType dt) { return in(dt, 1e-8); });
  row("3e-8 stored (just over 2^-25)", [](DType dt) { return in(dt, 3e-8); });
  row("2^-25 stored (the tie)", [](DType dt) { return in(dt, 0x1p-25); });
  row("65519 stored", [](DType dt) { return in(dt, 65519.0); });
  row("65520 stored", [](DType dt) { return in(dt, 65520.0); });
  row("0.1 stored", [](DType dt) { return in(dt, 0.1); });
  row("256 + 1 stored", [](DType dt) { return in(dt, 257.0); });
  return 0;
}
