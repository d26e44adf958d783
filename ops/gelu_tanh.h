// GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as GPT-2
// and PyTorch's gelu(approximate="tanh") compute it. The exact erf form is gelu() in
// activation.h. The `follow` class: computed in f32 (f64 for f64), rounded once.
#pragma once
#include "framework/tensor.h"

namespace hg {

Tensor gelu_tanh(const Tensor& x);

}  // namespace hg
