// Diagnosis rules: each names a number the run measured, so the report says *why*.
#include "bench/segbench/diagnosis.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace hg::segbench {

namespace {

std::string fmt(const char* f, double v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Mean over all sampled steps and layers that have the value (negative: n/a).
double overall_mean(const RunResult& r, double LayerStats::*field) {
  double s = 0;
  int64_t n = 0;
  for (const UnderflowSample& u : r.underflow)
    for (const LayerStats& l : u.layers) {
      if (l.*field < 0) continue;
      s += l.*field;
      ++n;
    }
  return n ? s / static_cast<double>(n) : 0;
}

}  // namespace

void diagnose(Report& report) {
  const RunResult* ref = nullptr;
  for (const RunResult& r : report.runs)
    if (r.precision == "fp32") ref = &r;
  for (RunResult& r : report.runs) {
    for (size_t i = 0; i < r.curves.eval_step.size(); ++i)
      if (r.curves.eval_dice[i] >= report.target_dice) {
        r.steps_to_target = r.curves.eval_step[i];
        break;
      }
    std::string d;
    if (r.stopped_early) d += "Training stopped: " + r.stop_reason + ". ";
    else if (r.first_nonfinite_step) d += "First non-finite loss at step " + std::to_string(*r.first_nonfinite_step) + ". ";
    if (!r.skipped_steps.empty()) {
      d += std::to_string(r.skipped_steps.size()) + " step(s) skipped by the loss scaler because gradients overflowed";
      if (!r.nonfinite_params.empty() && !r.nonfinite_params.front().second.empty())
        d += " (first at step " + std::to_string(r.nonfinite_params.front().first) + ", e.g. " +
             r.nonfinite_params.front().second.front().first + ": " +
             std::to_string(r.nonfinite_params.front().second.front().second) + " non-finite elements)";
      d += "; the scale settled at " + fmt("%g", r.curves.scale.empty() ? 0.0 : r.curves.scale.back()) + ". ";
    }
    const double zero = overall_mean(r, &LayerStats::grad_zero_fraction);
    const double under = overall_mean(r, &LayerStats::grad_underflow_fraction);
    const double lost = overall_mean(r, &LayerStats::update_lost_fraction);
    const double ref_zero = ref ? overall_mean(*ref, &LayerStats::grad_zero_fraction) : 0;
    // Backward computed the weight gradients in f16 (stored there, or widened into f32).
    const bool f16_grads = r.grads_dtype.rfind("f16", 0) == 0;
    if (f16_grads && zero > ref_zero + 0.01) {
      d += fmt("%.1f%% of stored weight-gradient elements were exactly zero", 100 * zero) +
           fmt(" (flushed to zero in f16; %.1f%% in fp32). ", 100 * ref_zero);
    } else if (!f16_grads && under > 0.001) {
      d += fmt("%.2f%% of weight-gradient elements are at most 2^-25 and would flush to zero if stored in f16 "
               "unscaled. ", 100 * under);
    }
    if (r.adam_v_flushed_fraction > 0.001)
      d += fmt("Adam keeps its moments in f16 here (as PyTorch does for a model cast with .half()): %.1f%% of "
               "its second-moment elements flushed to zero although their gradient was not, so their update "
               "became m / eps with eps = 1e-8, orders of magnitude too large. ",
               100 * r.adam_v_flushed_fraction);
    if (lost > 0.05)
      d += fmt("Over the sampled steps %.1f%% of weight updates were rounded away", 100 * lost) +
           " (smaller than half an ulp of the " + std::string(r.precision == "fp16" ? "f16" : "stored") + " weight). ";
    if (ref && &r != ref) {
      const double delta = r.val_dice_mean_fg - ref->val_dice_mean_fg;
      if (delta <= -0.05)
        d += fmt("Validation Dice is %.3f below fp32", -delta) + ".";
      else if (std::abs(delta) <= 0.01)
        d += fmt("Validation Dice matches fp32 (difference %+.3f).", delta);
      else
        d += fmt("Validation Dice differs from fp32 by %+.3f.", delta);
    }
    r.diagnosis = d;
  }
}

}  // namespace hg::segbench
