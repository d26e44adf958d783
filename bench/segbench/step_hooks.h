// The points of a segbench training step where instruments attach (StepHook), and the
// list that calls them (StepHooks), so train_run's loop shows only the AMP step itself.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "amp/grad_scaler.h"
#include "bench/segbench/data.h"
#include "framework/tensor.h"

namespace hg::segbench {

// What one step has produced so far; the loop fills it in as the step goes on, and each
// hook reads the fields that exist at its point.
struct StepState {
  int64_t step = 0;
  int64_t steps = 0;            // in the whole run
  bool sampled = false;         // gradient statistics and an update probe at this step
  double scale = 1;             // the loss scale this step's backward multiplies by
  const Batch* batch = nullptr;
  Tensor logits{}, loss{};      // after forward
  double loss_value = NAN;
  bool stopping = false;        // non-finite loss without a scaler: no update, the run ends
  amp::StepResult result{};     // after the optimizer step (empty when stopping)
  double seconds = 0;           // since training started, at the end of the step
  double dice = NAN;            // mean foreground validation Dice, when evaluated after this step
  double untimed_ms = 0;        // time instruments spent inside the optimizer phase, left out of its timing
};

// One instrument. Each point is called in the order the hooks were added.
class StepHook {
 public:
  virtual ~StepHook() = default;
  virtual void before_step(StepState&) {}          // before the batch goes to the device (and the clock starts)
  virtual void on_logits(StepState&, Tensor&) {}   // inside autocast, the model's output as computed
  virtual void after_backward(StepState&) {}       // gradients as backward stored them (scaled)
  virtual void after_unscale(StepState&) {}        // gradients unscaled, not yet clipped
  virtual void before_optimizer_step(StepState&) {}  // clipped; not called when stopping
  virtual void after_optimizer_step(StepState&) {}   // after scaler.step and scaler.update
  virtual void after_step(StepState&) {}           // gradients zeroed, the step timed
  virtual void after_run() {}                      // the loop has ended
};

class StepHooks {
 public:
  template <class H, class... Args>
  H& add(Args&&... args) {
    hooks_.push_back(std::make_unique<H>(std::forward<Args>(args)...));
    return static_cast<H&>(*hooks_.back());
  }
  void before_step(StepState& s) { for (auto& h : hooks_) h->before_step(s); }
  void on_logits(StepState& s, Tensor& logits) { for (auto& h : hooks_) h->on_logits(s, logits); }
  void after_backward(StepState& s) { for (auto& h : hooks_) h->after_backward(s); }
  void after_unscale(StepState& s) { for (auto& h : hooks_) h->after_unscale(s); }
  void before_optimizer_step(StepState& s) { for (auto& h : hooks_) h->before_optimizer_step(s); }
  void after_optimizer_step(StepState& s) { for (auto& h : hooks_) h->after_optimizer_step(s); }
  void after_step(StepState& s) { for (auto& h : hooks_) h->after_step(s); }
  void after_run() { for (auto& h : hooks_) h->after_run(); }

 private:
  std::vector<std::unique_ptr<StepHook>> hooks_;
};

}  // namespace hg::segbench
