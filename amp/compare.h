// FP32 vs reduced precision on one batch: the same weights run the same batch in f32 and under
// a policy; per module, in forward order, the relative error of its output and of its own weight
// gradients (a gradient that is zero in exact arithmetic, as k_proj's bias, reads as rounding noise
// only: see grad_error), and the first module over a threshold: where a reduced-precision run fails.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "amp/policy.h"
#include "nn/module.h"

namespace hg::amp {

struct CompareOptions {
  // Relative error that counts as a divergence for a module whose output is f16 (or
  // f32/f64); bf16 outputs are held to 8x this, the ratio of the unit roundoffs.
  double threshold = 1e-2;
  // Relative error that counts as a divergence for a module's weight gradients, every
  // dtype. Looser, because a gradient is rounded by every op of the backward pass behind
  // it, and BatchNorm's backward subtracts the batch mean of the gradient, cancelling most
  // of it: in a healthy U-Net (segbench --compare, quick profile) the deepest layers'
  // weight gradients are off by up to ~0.2 in f16 and ~0.6 in bf16. What AMP breaks is
  // gross: inf/NaN, gradients flushed to zero (error 1) or swamped.
  double grad_threshold = 0.75;
  // The reduced-precision backward runs on loss * scale when the policy uses f16, the
  // gradients divided by it before comparing. Like a dynamic GradScaler, the scale
  // starts here and halves (down to 1) while the gradients are not finite.
  double loss_scale = 65536.0;
};

struct ModuleComparison {
  std::string module;  // path ("" for the model itself)
  std::string type;    // "Conv2d"
  DType dtype = f32;   // dtype of the module's output under the policy
  double activation_error = 0;  // ||a - a_f32|| / ||a_f32||; inf when a is not finite
  double grad_error = -1;  // worst own param: |g - g32| / max(|g32|, 0.1 |G32|), G: all own params; -1: none
  double threshold = 0;         // what its output error is held to (per its dtype, see CompareOptions)
  double grad_threshold = 0;    // what its weight-gradient error is held to
  bool exceeds = false;
};

struct Comparison {
  std::string policy;
  double loss_f32 = 0, loss_policy = 0;
  double loss_scale = 1;  // the scale the reduced-precision gradients were computed at
  std::vector<ModuleComparison> modules;  // in the order the forwards finished
  // Where the divergence starts (index into modules): the first module whose output
  // error exceeds the threshold; if none does, the last whose gradient error does.
  std::optional<size_t> first_exceeding;
  double threshold = 0;       // CompareOptions::threshold (for f16)
  double grad_threshold = 0;  // CompareOptions::grad_threshold
  std::string table() const;  // a readable table, the first divergence marked
  std::string json() const;
};

using LossFn = std::function<Tensor(const Tensor& output)>;

// Runs forward and backward twice (f32, then `policy`) from the same state, with the
// model as the user set it (train/eval, per-module precision); both passes start from
// the same default-generator state, so a model in train() mode draws the same dropout
// masks in both. The parameters, buffers (values, dtypes and storage), gradients, the
// modules' modes and precisions and the generator state are restored afterwards.
Comparison compare(nn::Module& model, const Tensor& input, const LossFn& loss_fn, const Policy& policy,
                   CompareOptions options = {});

}  // namespace hg::amp
