// Tour step 15 (docs/amp.md): why mixed precision at all, in numbers that do not depend on
// the machine: bytes per element; the tensor memory of one training step of segbench's
// U-Net (width 8, depth 4, batch 16, 64x64) in fp32 and under autocast f16, measured by
// the CPU allocator's peak; and how a dimension that is not a multiple of 8 or 16 fills
// the tensor cores' tiles (mma.sync m16n8k16 takes K in steps of 16; a row of 16-bit
// values is a whole number of 16-byte copies only when it holds a multiple of 8).
#include <cstdio>
#include <optional>

#include "halfgrad.h"

using namespace hg;

namespace {

constexpr double kMB = 1 << 20;

// Peak tensor bytes of one forward + backward, and those held at the end of forward (what
// the graph saved for backward, plus the output).
void step_memory(bool amp, double* peak, double* after_forward) {
  manual_seed(0);
  UNet model(1, 4, 8, 4);
  Generator gen(1);
  const Tensor x = randn({16, 64, 64, 1}, {}, &gen);
  const Tensor target = randint(0, 4, {16, 64, 64}, {i64}, &gen);
  const double base = static_cast<double>(memory_stats(Device::cpu()).in_use);
  reset_peak_memory(Device::cpu());
  Tensor loss;
  {
    std::optional<amp::Autocast> ac;
    if (amp) ac.emplace(f16);
    loss = cross_entropy(model(x), target);
  }
  *after_forward = (memory_stats(Device::cpu()).in_use - base) / kMB;
  loss.backward();
  *peak = (memory_stats(Device::cpu()).peak - base) / kMB;
}

}  // namespace

int main() {
  set_num_threads(1);  // the same allocations, in the same order, on every machine
  std::printf("bytes per element: f32 %zu, f16 %zu, bf16 %zu\n\n", dtype_size(f32), dtype_size(f16), dtype_size(bf16));

  double peak32, fwd32, peak16, fwd16;
  step_memory(false, &peak32, &fwd32);
  step_memory(true, &peak16, &fwd16);
  std::printf("U-Net step, batch 16, 64x64  held after forward  peak in forward+backward\n");
  std::printf("fp32                         %9.1f MB        %9.1f MB\n", fwd32, peak32);
  std::printf("amp (autocast f16)           %9.1f MB        %9.1f MB\n", fwd16, peak16);
  std::printf("amp / fp32                   %9.2f           %9.2f\n\n", fwd16 / fwd32, peak16 / peak32);

  std::printf("K (a GEMM's inner dim)  k16 steps  padded share  f16 row in 16-byte copies\n");
  for (int64_t k : {4, 27, 1000, 1024, 50257, 50304}) {
    const int64_t steps = (k + 15) / 16;
    std::printf("%22lld  %9lld  %11.2f%%  %s\n", static_cast<long long>(k), static_cast<long long>(steps),
                100.0 * static_cast<double>(steps * 16 - k) / static_cast<double>(steps * 16),
                k % 8 == 0 ? "yes" : "no: element by element");
  }
  return 0;
}
