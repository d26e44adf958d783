// Constructed models for the AMP debugging tools' tests: a small MLP whose middle
// layer "big" overflows f16 in forward while the f32 run stays healthy and well
// conditioned: big sees its input multiplied by `gain` and its output divided by it.
#pragma once
#include "halfgrad.h"

namespace hg::test {

struct OverflowNet : nn::Module {
  HG_CHILD(nn::Linear, fc1, 4, 16);
  HG_CHILD(nn::Linear, big, 16, 16);
  HG_CHILD(nn::Linear, shrink, 16, 1);
  const double gain;

  // gain 1e4 (with big's weights x10) puts big's outputs near 9e4, past 65504.
  explicit OverflowNet(double g = 1.0) : gain(g) {
    NoGrad ng;
    copy_(big->weight, mul(big->weight, 10.0));
  }
  Tensor forward_impl(const Tensor& x) override {
    Tensor h = relu((*fc1)(x));
    Tensor z = relu((*big)(mul(h, gain)));
    return (*shrink)(mul(z, 1.0 / gain));
  }
  std::string type_name() const override { return "OverflowNet"; }
};

}  // namespace hg::test
