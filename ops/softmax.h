// softmax and log_softmax over one axis (the `fp32` class), numerically stable: the
// maximum is subtracted before exponentiating, sums accumulate in f32.
#pragma once
#include "framework/tensor.h"

namespace hg {

Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);

}  // namespace hg
