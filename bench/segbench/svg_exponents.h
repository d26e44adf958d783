// The gradient-exponent histogram (after Micikevicius et al. 2018, Fig. 3): log2 |g| of one
// gradient tensor over f16's bands (flush, subnormal, normal, overflow), one panel per run,
// so a reader sees the loss scale shift the whole distribution out of the flush band.
#pragma once
#include <string>
#include <vector>

#include "bench/segbench/run_result.h"

namespace hg::segbench {

struct ExponentPanel {
  std::string title;  // e.g. "fp32, step 450: stored f32, unscaled"
  const GradientExponents* exponents = nullptr;
};

// An <svg> element; the band fractions are printed in each panel.
std::string svg_exponent_histogram(const std::string& title, const std::vector<ExponentPanel>& panels);

// "flush 71.2%, subnormal 20.0%, normal 8.8%, overflow 0.0%, zero 0.0%" (fractions of numel),
// naming a band "would flush if stored in f16" where the values are not stored in f16.
std::string exponent_bands_text(const GradientExponents& e);

}  // namespace hg::segbench
