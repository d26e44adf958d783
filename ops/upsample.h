// Upsampling of NHWC images by an integer factor (the `follow` class).
#pragma once
#include "framework/tensor.h"

namespace hg {

enum class UpsampleMode : uint8_t { nearest, bilinear };

// x [N, H, W, C] -> [N, H*scale, W*scale, C]. Bilinear uses half-pixel centres
// (PyTorch's align_corners=false).
Tensor upsample(const Tensor& x, int64_t scale = 2, UpsampleMode mode = UpsampleMode::nearest);

}  // namespace hg
