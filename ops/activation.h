// Activations (the `follow` class, except sigmoid/tanh/gelu which also run in the
// input's dtype, computed in f32 and rounded once) and dropout.
#pragma once
#include "framework/generator.h"
#include "framework/tensor.h"

namespace hg {

Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact (erf) form
// Zeroes each element with probability p and scales the rest by 1/(1-p) in training;
// the identity otherwise. The mask comes from `gen` (default generator if null).
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace hg
