// One segbench run: trains the U-Net in one precision mode on the procedural data and
// measures speed, memory, numerics and validation quality into a RunResult.
#pragma once
#include <functional>
#include <vector>

#include "bench/segbench/data.h"
#include "bench/segbench/run_result.h"
#include "framework/device.h"

namespace hg::segbench {

// The fixed validation set, generated once and shared by every run.
struct ValidationSet {
  std::vector<Batch> batches;  // chunks of at most 16 images
  int64_t images = 0;
};
ValidationSet make_validation_set(const Config& cfg);

// Called after every step with (step, steps, loss, dice or NaN, scale, images/s).
using ProgressFn = std::function<void(int64_t, int64_t, double, double, double, double)>;

RunResult train_run(const Config& cfg, const std::string& precision, Device device, const ValidationSet& val,
                    const ProgressFn& progress);

// The benchmark's loss: cross-entropy (mean over pixels) + 1 - mean foreground soft Dice.
Tensor segmentation_loss(const Tensor& logits, const Tensor& target);

}  // namespace hg::segbench
