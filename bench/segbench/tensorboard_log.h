// segbench's TensorBoard log: one run's curves and gradient-exponent histograms as event
// files under <out>/tb/<mode>/, so runs can be compared with `tensorboard --logdir <out>/tb`.
#pragma once
#include <string>

#include "bench/segbench/run_result.h"

namespace hg::segbench {

// Scalars per step: train/loss, amp/loss_scale, amp/skipped_steps (running count); per
// evaluation: val/dice; per sampled step: grad/logits_flushed (stored zeros) and a
// histogram grad/logits_log2 of log2 |g| of the stored logit gradients.
void write_tensorboard(const RunResult& run, const std::string& dir);

}  // namespace hg::segbench
