// Constant padding (the `follow` class).
#pragma once
#include <vector>

#include "framework/tensor.h"

namespace hg {

// before[i] and after[i] elements of `value` added on each side of axis i; one entry
// per axis of x, all non-negative.
Tensor pad(const Tensor& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after, double value = 0.0);

}  // namespace hg
