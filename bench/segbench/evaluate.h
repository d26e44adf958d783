// Validation metrics of argmax predictions: Dice and IoU per class, averaged over
// images, where a class absent from both prediction and truth counts 1 (milesial-style).
#pragma once
#include <vector>

#include "bench/segbench/data.h"
#include "nn/module.h"

namespace hg::segbench {

struct Metrics {
  std::vector<double> dice, iou;  // per class
  double dice_mean_fg = 0, iou_mean_fg = 0;
  std::vector<std::vector<int64_t>> predictions;  // argmax of the first `keep` images
};

// Runs `model` in eval mode (no graph) on `batches` (up to max_images), casting inputs
// to `input_dtype` and running under autocast `compute` when set.
Metrics evaluate(nn::Module& model, const std::vector<Batch>& batches, int64_t max_images, DType input_dtype,
                 std::optional<DType> compute, int64_t keep = 0);

// Dice/IoU of one prediction against its truth (flattened labels), per class.
void accumulate_image_scores(const int64_t* pred, const int64_t* truth, int64_t n, int classes,
                             std::vector<double>& dice_sum, std::vector<double>& iou_sum);

}  // namespace hg::segbench
