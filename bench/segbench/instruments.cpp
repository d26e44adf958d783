// The instruments of instruments.h. Each does at its step points what train_run's loop
// once did inline, in the same order, so the run's results and output are unchanged.
#include "bench/segbench/instruments.h"

#include <chrono>
#include <cstdio>

#include "bench/segbench/evaluate.h"
#include "bench/segbench/grad_stats.h"
#include "bench/segbench/profile_section.h"
#include "framework/autograd.h"

namespace hg::segbench {

MonitorHook::MonitorHook(nn::Module& model, int64_t every, RunResult& run)
    : monitor_(model, amp::MonitorOptions{.every = every}), run_(run) {}

void MonitorHook::before_step(StepState& s) { monitor_.begin_step(s.step); }

void MonitorHook::after_unscale(StepState&) { monitor_.end_step(); }

void MonitorHook::after_run() {
  run_.numerics_worst = monitor_.worst_table(8);
  run_.numerics_jsonl = monitor_.jsonl();
}

FallbackHook::FallbackHook(nn::Module& model, int64_t strikes, RunResult& run, bool log)
    : fallback_(model, amp::FallbackOptions{.strikes = strikes}), run_(run), log_(log) {}

void FallbackHook::before_step(StepState& s) { fallback_.begin_step(s.step); }

void FallbackHook::after_optimizer_step(StepState& s) {
  const size_t known = fallback_.events().size();
  fallback_.end_step(&s.result);
  for (size_t k = known; k < fallback_.events().size(); ++k) {
    const amp::FallbackEvent& e = fallback_.events()[k];
    run_.fallback_events.push_back({e.step, e.module, e.reason});
    if (log_)
      std::printf("\n%s: step %lld: %s now runs in f32: %s\n", run_.precision.c_str(), static_cast<long long>(e.step),
                  e.module.c_str(), e.reason.c_str());
  }
}

void OpProfileHook::before_step(StepState& s) {
  if (s.step >= cfg_.profile_ops_step && s.step < cfg_.profile_ops_step + kProfiledSteps) profiler_.emplace(true);
}

void OpProfileHook::after_step(StepState& s) {
  if (!profiler_) return;
  finish_op_profile(*profiler_, cfg_, run_.precision, s.step, run_.op_profile);
  profiler_.reset();
}

void DumpFirstStep::before_step(StepState& s) {
  if (s.step != 0) return;
  NoGrad ng;
  for (auto& [k, v] : model_.state_dict()) before_[k] = v.to(f32).clone();
}

void DumpFirstStep::after_unscale(StepState& s) {
  if (s.step != 0) return;
  StateDict sd = std::move(before_);
  sd["input"] = s.batch->image;
  sd["target"] = s.batch->label;
  sd["logits"] = s.logits.detach().to(f32);
  sd["loss"] = s.loss.detach().to(f32);
  for (auto& [name, p] : opt_params_)
    if (p.grad().defined()) sd["grad." + name] = p.grad().to(f32);
  save_safetensors(cfg_.dump + "/" + precision_ + ".safetensors", sd, {{"precision", precision_}});
}

void UnderflowSampler::before_step(StepState&) { sample_ = {}; }

void UnderflowSampler::on_logits(StepState& s, Tensor& logits) {
  if (!s.sampled) return;
  // The output's gradient as backward stores it: before any Cast widens it to f32.
  logits.register_hook([this, scale = s.scale](const Tensor& g) {
    sample_.logits = gradient_exponents(g, scale);
    return Tensor();
  });
}

void UnderflowSampler::after_backward(StepState& s) {
  if (!s.sampled) return;
  ProfilePause pause;  // segbench's own statistics are not the step's ops
  // Where backward stored them: the model's parameters (f16 ones for amp-master).
  sample_.layers = stored_gradient_stats(model_.named_parameters(), s.scale);
  sample_.step = s.step;
}

void UnderflowSampler::after_step(StepState& s) {
  if (!s.sampled) return;
  // Weight elements whose update was rounded away (0 on a skipped step: nothing was proposed).
  if (!run_.updates.empty() && run_.updates.back().step == s.step)
    for (const LayerUpdate& l : run_.updates.back().layers)
      for (LayerStats& ls : sample_.layers)
        if (ls.name == l.name) ls.update_lost_fraction = l.unchanged_fraction;
  run_.underflow.push_back(std::move(sample_));
}

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
}  // namespace

void UpdateProbeHook::before_optimizer_step(StepState& s) {
  if (!s.sampled && s.step >= kFirstUpdateSteps) return;
  const auto t = Clock::now();
  {
    ProfilePause pause;
    probe_.emplace(opt_);
  }
  s.untimed_ms += ms_since(t);
}

void UpdateProbeHook::after_optimizer_step(StepState& s) {
  if (!probe_) return;
  const auto t = Clock::now();
  {
    ProfilePause pause;
    run_.updates.push_back(probe_->measure(s.step, s.result.skipped()));
  }
  probe_.reset();
  s.untimed_ms += ms_since(t);
}

void CurveRecorder::after_step(StepState& s) {
  if (s.result.skipped()) {
    run_.skipped_steps.push_back(s.step);
    auto bad = s.result.nonfinite();
    if (!bad.empty() && run_.nonfinite_params.size() < 20) run_.nonfinite_params.emplace_back(s.step, bad);
    // The training log names the parameters of the first few skipped steps.
    if (log_ && ++skip_lines_ <= 5)
      std::printf("\n%s: step %lld: %s\n", run_.precision.c_str(), static_cast<long long>(s.step),
                  s.result.summary().c_str());
  }
  Curves& c = run_.curves;
  c.step.push_back(s.step);
  c.seconds.push_back(s.seconds);
  c.loss.push_back(s.loss_value);
  c.scale.push_back(s.scale);
  c.lr.push_back(opt_.param_groups()[0].lr.value_or(lr_));  // after sched.step(): the next step's lr
  run_.steps_done = s.step + 1;
  if (!std::isfinite(s.loss_value) && !run_.first_nonfinite_step) run_.first_nonfinite_step = s.step;
}

void PeriodicEval::after_step(StepState& s) {
  if ((s.step + 1) % cfg_.eval_every != 0 || s.step + 1 >= cfg_.steps) return;
  Metrics m = evaluate(model_, val_.batches, cfg_.eval_subset, input_dtype_, compute_);
  s.dice = m.dice_mean_fg;
  run_.curves.eval_step.push_back(s.step + 1);
  run_.curves.eval_seconds.push_back(s.seconds);
  run_.curves.eval_dice.push_back(s.dice);
}

void ProgressHook::after_step(StepState& s) {
  fn_(s.step, s.steps, s.loss_value, s.dice, s.scale, static_cast<double>((s.step + 1) * batch_) / std::max(s.seconds, 1e-9));
}

}  // namespace hg::segbench
