// Gradient statistics of a sampled step, taken on the gradients AS STORED (still
// multiplied by the loss scale, in the dtype backward wrote them), with f16's bands:
// |g| <= 2^-25 flushes to zero, (2^-25, 2^-14) is subnormal, |g| >= 65520 overflows.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "bench/segbench/run_result.h"
#include "framework/tensor.h"

namespace hg::segbench {

// Per parameter: stored gradients (before unscaling); scale is the loss scale in them.
// update_lost_fraction is left 0 for the caller.
std::vector<LayerStats> stored_gradient_stats(const std::vector<std::pair<std::string, Tensor>>& params, double scale);

// The exponent histogram and band counts of one gradient tensor as stored.
GradientExponents gradient_exponents(const Tensor& grad, double scale);

}  // namespace hg::segbench
