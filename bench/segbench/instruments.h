// segbench's instruments, each a StepHook that train_run registers on its step: the AMP
// debugging tools (numerics monitor, fp32 fallback), the op profiler, the first-step dump,
// the sampled gradient and update statistics, the curves, periodic validation and progress.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amp/fp32_fallback.h"
#include "amp/numerics_monitor.h"
#include "bench/segbench/step_hooks.h"
#include "bench/segbench/train.h"
#include "bench/segbench/update_stats.h"
#include "framework/profiler.h"
#include "framework/serialize/safetensors.h"
#include "optim/optimizer.h"

namespace hg::segbench {

using NamedParams = std::vector<std::pair<std::string, Tensor>>;

// amp::NumericsMonitor every `every` steps; its worst layers and records go into the run.
class MonitorHook : public StepHook {
 public:
  MonitorHook(nn::Module& model, int64_t every, RunResult& run);
  void before_step(StepState& s) override;
  void after_unscale(StepState& s) override;  // weight gradients unscaled, before clipping
  void after_run() override;

 private:
  amp::NumericsMonitor monitor_;
  RunResult& run_;
};

// amp::Fp32Fallback: a module whose output keeps overflowing is switched to f32; each
// switch is recorded in the run and, with `log`, printed.
class FallbackHook : public StepHook {
 public:
  FallbackHook(nn::Module& model, int64_t strikes, RunResult& run, bool log);
  void before_step(StepState& s) override;
  void after_optimizer_step(StepState& s) override;

 private:
  amp::Fp32Fallback fallback_;
  RunResult& run_;
  bool log_;
};

// --profile-ops N: hg::Profiler over steps N .. N + kProfiledSteps - 1 (without the next
// batch's preparation), folded into the run's op profile.
class OpProfileHook : public StepHook {
 public:
  OpProfileHook(const Config& cfg, RunResult& run) : cfg_(cfg), run_(run) {}
  void before_step(StepState& s) override;
  void after_step(StepState& s) override;

 private:
  const Config& cfg_;
  RunResult& run_;
  std::optional<Profiler> profiler_;
};

// --dump: the first step's weights (before it), input, target, logits, loss and
// unscaled gradients into <dump>/<precision>.safetensors.
class DumpFirstStep : public StepHook {
 public:
  DumpFirstStep(const Config& cfg, const std::string& precision, nn::Module& model, const NamedParams& opt_params)
      : cfg_(cfg), precision_(precision), model_(model), opt_params_(opt_params) {}
  void before_step(StepState& s) override;
  void after_unscale(StepState& s) override;

 private:
  const Config& cfg_;
  std::string precision_;
  nn::Module& model_;
  const NamedParams& opt_params_;
  StateDict before_;
};

// On sampled steps: the logits' gradient and every parameter's gradient as backward
// stored them, and the share of each layer's update that rounding lost.
class UnderflowSampler : public StepHook {
 public:
  UnderflowSampler(nn::Module& model, RunResult& run) : model_(model), run_(run) {}
  void before_step(StepState& s) override;
  void on_logits(StepState& s, Tensor& logits) override;
  void after_backward(StepState& s) override;
  void after_step(StepState& s) override;

 private:
  nn::Module& model_;
  RunResult& run_;
  UnderflowSample sample_;
};

// The update/weight ratios (UpdateProbe) of the first kFirstUpdateSteps steps and of the
// sampled ones. Its host copies are left out of the step's timing and op profile.
class UpdateProbeHook : public StepHook {
 public:
  UpdateProbeHook(const optim::Optimizer& opt, RunResult& run) : opt_(opt), run_(run) {}
  void before_optimizer_step(StepState& s) override;
  void after_optimizer_step(StepState& s) override;

 private:
  const optim::Optimizer& opt_;
  RunResult& run_;
  std::optional<UpdateProbe> probe_;
};

// The run's curves (loss, scale, lr per step), its skipped and first non-finite steps;
// with `log`, the parameters of the first few skipped steps are printed.
class CurveRecorder : public StepHook {
 public:
  CurveRecorder(const optim::Optimizer& opt, double lr, RunResult& run, bool log)
      : opt_(opt), lr_(lr), run_(run), log_(log) {}
  void after_step(StepState& s) override;

 private:
  const optim::Optimizer& opt_;
  double lr_;
  RunResult& run_;
  bool log_;
  int64_t skip_lines_ = 0;
};

// Validation Dice on cfg.eval_subset images every cfg.eval_every steps (not after the
// last step: train_run evaluates the whole set there).
class PeriodicEval : public StepHook {
 public:
  PeriodicEval(const Config& cfg, nn::Module& model, const ValidationSet& val, DType input_dtype,
               std::optional<DType> compute, RunResult& run)
      : cfg_(cfg), model_(model), val_(val), input_dtype_(input_dtype), compute_(compute), run_(run) {}
  void after_step(StepState& s) override;

 private:
  const Config& cfg_;
  nn::Module& model_;
  const ValidationSet& val_;
  DType input_dtype_;
  std::optional<DType> compute_;
  RunResult& run_;
};

// Calls the ProgressFn after every step.
class ProgressHook : public StepHook {
 public:
  ProgressHook(ProgressFn fn, int64_t batch) : fn_(std::move(fn)), batch_(batch) {}
  void after_step(StepState& s) override;

 private:
  ProgressFn fn_;
  int64_t batch_;
};

}  // namespace hg::segbench
