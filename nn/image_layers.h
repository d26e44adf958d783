// Layers around convolutional networks beyond layers.h: Flatten, Dropout2d (whole
// channels) and AdaptiveAvgPool2d (a fixed output size). Images are NHWC.
#pragma once
#include <cstdint>
#include <string>

#include "nn/module.h"

namespace hg::nn {

// Flattens axes start_axis..end_axis into one (default: all but the batch axis).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_axis = 1, int64_t end_axis = -1) : start_axis(start_axis), end_axis(end_axis) {}
  std::string type_name() const override { return "Flatten"; }
  const int64_t start_axis, end_axis;

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

// Zeroes whole channels of NHWC input [N, H, W, C] with probability p in training (one
// draw per sample and channel), scaling the rest by 1/(1-p); the identity in eval mode.
class Dropout2d : public Module {
 public:
  explicit Dropout2d(double p = 0.5);
  std::string type_name() const override { return "Dropout2d"; }
  const double p;

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

// Averages NHWC input [N, H, W, C] to [N, out_h, out_w, C]; output cell i covers rows
// floor(i H / out_h) to ceil((i + 1) H / out_h) - 1 (and likewise columns), as PyTorch's.
class AdaptiveAvgPool2d : public Module {
 public:
  AdaptiveAvgPool2d(int64_t out_h, int64_t out_w);
  explicit AdaptiveAvgPool2d(int64_t out) : AdaptiveAvgPool2d(out, out) {}
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  const int64_t out_h, out_w;

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

}  // namespace hg::nn
