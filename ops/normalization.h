// Layer normalisation (the `fp32` class: under autocast it runs and returns f32; on
// f16/bf16 input outside autocast the statistics are still f32 and the output rounds once).
#pragma once
#include "framework/tensor.h"

namespace hg {

// Normalises over the trailing axes given by normalized_shape (x's last dims):
// (x - mean) / sqrt(var + eps) * weight + bias, var biased as PyTorch's. weight and
// bias have shape normalized_shape and may be undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace hg
