// Pooling on NHWC images (the `follow` class: output in the input's dtype).
#pragma once
#include <array>

#include "framework/tensor.h"

namespace hg {

struct Pool2dOptions {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{0, 0};  // 0: same as the kernel
  std::array<int64_t, 2> padding{0, 0};
};

// The maximum of each window (padding never wins); backward routes each gradient to
// the argmax kept from the forward pass.
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& o = {});
// The mean of each window, padding counted as zeros (PyTorch's count_include_pad=true).
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& o = {});

}  // namespace hg
