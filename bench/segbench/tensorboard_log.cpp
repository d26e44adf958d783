// Written from the finished RunResult rather than inside the training loop, so the loop's
// timings do not include event-file writes.
#include "bench/segbench/tensorboard_log.h"

#include <cmath>

#include "tools/tensorboard.h"

namespace hg::segbench {

void write_tensorboard(const RunResult& run, const std::string& dir) {
  logging::SummaryWriter tb(dir);
  const Curves& c = run.curves;
  size_t skipped = 0;
  for (size_t i = 0; i < c.step.size(); ++i) {
    while (skipped < run.skipped_steps.size() && run.skipped_steps[skipped] <= c.step[i]) ++skipped;
    if (std::isfinite(c.loss[i])) tb.add_scalar("train/loss", c.loss[i], c.step[i]);
    tb.add_scalar("amp/loss_scale", c.scale[i], c.step[i]);
    tb.add_scalar("amp/skipped_steps", static_cast<double>(skipped), c.step[i]);
  }
  for (size_t i = 0; i < c.eval_step.size(); ++i) tb.add_scalar("val/dice", c.eval_dice[i], c.eval_step[i]);
  for (const UnderflowSample& s : run.underflow) {
    const GradientExponents& e = s.logits;
    if (e.dtype.empty() || e.numel == 0) continue;
    tb.add_scalar("grad/logits_flushed", static_cast<double>(e.zeros) / static_cast<double>(e.numel), s.step);
    // Exponent k = floor(log2 |g|) goes into the bucket (k - 0.5, k + 0.5], centred on k.
    logging::Histogram h;
    h.min = INFINITY;
    h.max = -INFINITY;
    for (int k = GradientExponents::kLo; k <= GradientExponents::kHi; ++k) {
      const double n = static_cast<double>(e.bins[static_cast<size_t>(k - GradientExponents::kLo)]);
      h.bucket_limit.push_back(k + 0.5);
      h.bucket.push_back(n);
      if (n == 0) continue;
      h.min = std::min(h.min, static_cast<double>(k));
      h.max = std::max(h.max, static_cast<double>(k));
      h.num += n;
      h.sum += n * k;
      h.sum_squares += n * k * k;
    }
    if (h.num == 0) h.min = h.max = 0;
    tb.add_histogram("grad/logits_log2", h, s.step);
  }
  tb.flush();
}

}  // namespace hg::segbench
