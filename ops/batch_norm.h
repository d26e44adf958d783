// Batch normalisation over the channel axis of channels-last tensors (the `fp32`
// class for its statistics). x may be f16/bf16 with f32 weight, bias and running
// statistics (kept in f32 under AMP); the output has x's dtype.
#pragma once
#include "framework/tensor.h"

namespace hg {

// x [..., C]. Training: normalise with the batch's mean and biased variance over every
// axis but the last, and update running_mean/running_var in place (no gradient) with
// `momentum` and the unbiased variance (a channel whose batch statistics are not finite
// keeps its running values). Eval: normalise with the running statistics.
// weight/bias [C] may be undefined (no affine transform); running stats may be
// undefined in training (then nothing is tracked).
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

// relu(batch_norm(...)) as one op, the same bits: one pass over x forward, and backward relu's
// mask applied while batch_norm's sums are taken (no ReLU pass, no tensor between the two).
// The ReLU's output is saved for its mask (the next layer usually keeps it anyway). On a device
// without the fused kernels, the two ops composed.
Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

}  // namespace hg
