// Losses (the `fp32` class). Logits are channels-last: the class axis is the last one.
// Each returns the mean over elements as a 0-d tensor in the logits' dtype, computed
// with f32 accumulation.
#pragma once
#include "framework/tensor.h"

namespace hg {

struct CrossEntropyOptions {
  int64_t ignore_index = -100;  // targets equal to this contribute nothing
  Tensor weight;                // optional class weights [C]; the mean is then weighted
};

// logits [..., C], target i64 [...] with values in [0, C) (or ignore_index).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o = {});
// Elementwise binary cross-entropy on logits; target has logits' shape, values in [0, 1].
Tensor bce_with_logits(const Tensor& logits, const Tensor& target);
Tensor mse_loss(const Tensor& input, const Tensor& target);
// Soft Dice per class over all positions: probs [..., C], target i64 [...] ->
// [C] with dice_c = (2 sum p_c y_c + eps) / (sum p_c + sum y_c + eps).
Tensor soft_dice(const Tensor& probs, const Tensor& target, double eps = 1e-6);

}  // namespace hg
