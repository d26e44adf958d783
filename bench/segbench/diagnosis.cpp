// Diagnosis rules: each names a number the run measured, so the report says *why*.
#include "bench/segbench/diagnosis.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "bench/segbench/update_compare.h"
#include "bench/segbench/update_stats.h"

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

std::string pct(double v) { return fmt("%.1f%%", 100 * v); }

std::string steps_text(int64_t first, int64_t last) {
  return first == last ? "Step " + std::to_string(first) + " was"
                       : "Steps " + std::to_string(first) + "-" + std::to_string(last) + " were";
}

// What Adam's state says about the worst oversized step u (f: fp32's at that step): the
// share of its update from elements whose stored v had flushed, and from those among them
// whose gradient was 0 too, so that they divided by eps alone.
std::string adam_mechanism(const UpdateSample& u, const UpdateSample& f) {
  if (u.v_lost_share < 0) return "";
  const std::string v_lost = pct(u.v_lost_fraction) + " of the weights started the step with Adam's stored second "
                             "moment v = 0 although m was not (v had flushed when it was stored), and they carried " +
                             pct(u.v_lost_share) + " of the update (by squared norm)";
  if (u.eps_only_share >= 0.5)
    return pct(u.eps_only_share) + " of that update (by squared norm) came from the " + pct(u.eps_only_fraction) +
           " of weights whose gradient was 0 at that step (flushed in f16; fp32's gradient had " +
           pct(f.grad_zero_fraction) + " zeros) while their stored v was 0 too, so m / (sqrt(v) + eps) became m / eps with eps = 1e-8: "
           "each of them moved " + fmt(u.eps_only_mean_step >= 100 ? "%.0f" : "%.3g", u.eps_only_mean_step) +
           " x lr on average. In all, " + v_lost + ". ";
  if (u.v_lost_share >= 0.5)
    return v_lost + ": the denominator held only this step's gradient while m still carried larger earlier ones (" +
           pct(u.eps_only_share) + " of the update from weights whose gradient was 0 too: m / eps). ";
  return "Adam's second moment does not explain it: weights whose stored v had flushed carried only " +
         pct(u.v_lost_share) + " of that update. ";
}

// What keeps the first updates normal, from the runs that keep Adam's state in f32.
std::string f32_state_remedy(const Report& report, const RunResult& r) {
  std::string s = "A loss scaler would not have prevented this: the optimizer reads the gradients unscaled, so "
                  "(1 - beta2) g^2 flushes in f16 state all the same. Adam's state in f32 does";
  std::string seen;
  for (const RunResult& o : report.runs) {
    if (&o == &r || o.optimizer_name != "Adam" || o.optimizer_state_dtype.find("f16") != std::string::npos) continue;
    if (o.precision != "amp-master" && o.precision != "fp16-f32state") continue;
    const RunResult* ref = update_reference(report, o);
    const UpdateJump j = ref ? update_jump(o, *ref, kFirstUpdateSteps) : UpdateJump{};
    if (j.max_factor <= 0) continue;
    const bool master = o.params_dtype.find("master") != std::string::npos;
    seen += (seen.empty() ? ": " : "; ") + o.precision + (master ? " (f32 master weights" : " (f16 weights") +
            ", Adam state f32) " + fmt("stepped at most %.2f x fp32's update/weight ratio", j.max_factor);
  }
  return s + (seen.empty() ? " (amp-master keeps f32 master weights and state; --ablations adds fp16-f32state). "
                           : seen + fmt(" over steps 0-%.0f. ", kFirstUpdateSteps - 1));
}

// The first steps whose update was oversized against fp32's, why, and what prevents it.
std::string update_story(const Report& report, const RunResult& r) {
  const RunResult* ref = update_reference(report, r);
  if (!ref) return "";
  const UpdateJump j = update_jump(r, *ref, kFirstUpdateSteps);
  if (!j.worst) return "";
  const UpdateSample &u = *j.worst, &f = *j.ref;
  std::string d = steps_text(j.first, j.last) + " finite, but" + fmt(" the updates were up to %.0f x ", j.factor) +
                  ref->precision + "'s: at step " + std::to_string(u.step) +
                  fmt(" the update/weight ratio ||w_after - w_before|| / ||w_before|| was %.3g", u.ratio) +
                  fmt(" (largest layer %.3g, ", u.max_layer_ratio) + u.max_layer + ") against " + fmt("%.3g", f.ratio) +
                  fmt(" (largest layer %.3g) in ", f.max_layer_ratio) + ref->precision + ", and " +
                  pct(u.big_step_fraction) + fmt(" of the weights moved by more than 10 x lr (lr = %.3g; ", u.lr) +
                  pct(f.big_step_fraction) + " in " + ref->precision + "). " + adam_mechanism(u, f);
  if (const UpdateSample* s0 = update_at(r, 0); s0 && j.first > 0 && u.v_lost_share >= 0.5)
    if (const UpdateSample* f0 = update_at(*ref, 0))
      d += fmt("Step 0 was normal (ratio %.3g", s0->ratio) + fmt(" against %.3g): ", f0->ratio) +
           "each update computes v in f32 from the stored v and the new g^2 and only then rounds it into f16, so at "
           "step 0, where m too held only that g, the step was right; from step 1 on v had lost the earlier g^2 that "
           "m still carried. ";
  if (r.first_nonfinite_step && *r.first_nonfinite_step > j.last)
    d += "These finite updates wrecked the weights before the loss became non-finite at step " +
         std::to_string(*r.first_nonfinite_step) + ". ";
  if (u.v_lost_share >= 0.5) d += f32_state_remedy(report, r);
  return d;
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
      d += "Adam keeps its moments in f16 here (as PyTorch does for a model cast with .half()): " +
           fmt("up to %.1f%% of its second-moment elements were stored as 0 although their gradient was not ",
               100 * r.adam_v_flushed_fraction) +
           "((1 - beta2) g^2 <= 2^-25 flushes), so v forgets gradients that m still remembers. ";
    d += update_story(report, r);
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
