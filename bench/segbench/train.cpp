// The training loop of one run: the precision recipe (autocast, parameter dtype, master
// weights, loss scaling), Adam (or SGD) with cosine decay and clipping of unscaled gradients,
// and the time of each phase; every other measurement is an instrument (instruments.h).
#include "bench/segbench/train.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <functional>
#include <memory>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "amp/master_weights.h"
#include "amp/policy.h"
#include "bench/segbench/distributed.h"
#include "bench/segbench/evaluate.h"
#include "ops/cpu/gemm/kernel.h"
#include "bench/segbench/instruments.h"
#include "bench/segbench/modes.h"
#include "bench/segbench/step_hooks.h"
#include "framework/allocator.h"
#include "framework/cpu/isa.h"
#include "framework/cpu/threads.h"
#include "framework/generator.h"
#include "models/unet.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"

namespace hg::segbench {

namespace {

using Clock = std::chrono::steady_clock;

// The training batches, each prepared on a second thread while the step before it trains.
class BatchStream {
 public:
  explicit BatchStream(const Config& cfg) : cfg_(cfg), next_(std::async(std::launch::async, fetch, std::cref(cfg), 0)) {}
  ~BatchStream() { wait(); }
  Batch next(int64_t step) {
    Batch b = next_.get();
    if (step == cfg_.poison_step) {  // the test hook: one NaN pixel
      b.image = b.image.contiguous().clone();
      b.image.data<float>()[0] = NAN;
    }
    if (step + 1 < cfg_.steps) next_ = std::async(std::launch::async, fetch, std::cref(cfg_), step + 1);
    return b;
  }
  void wait() {
    if (next_.valid()) next_.wait();
  }

 private:
  static Batch fetch(const Config& cfg, int64_t step) {
    ThreadLimit one(1);  // the training loop owns the cores; this thread only prepares data
    return make_batch(cfg.seed, 0, first_image_of(step, cfg.batch), cfg.batch, cfg.size);
  }
  const Config& cfg_;
  std::future<Batch> next_;
};

// Milliseconds per phase of the step; lap() ends one phase and starts the next.
class PhaseClock {
 public:
  void lap(double& ms, double left_out_ms = 0) {
    const auto now = Clock::now();
    ms = std::chrono::duration<double, std::milli>(now - t_).count() - left_out_ms;
    t_ = now;
  }

 private:
  Clock::time_point t_ = Clock::now();
};

// This step's phase times and the kept ones of all steps.
struct PhaseTimes {
  double forward = 0, backward = 0, optimizer = 0;
  std::vector<double> all_step, all_forward, all_backward, all_optimizer;
  void keep(bool yes) {
    if (!yes) return;
    all_step.push_back(forward + backward + optimizer);
    all_forward.push_back(forward);
    all_backward.push_back(backward);
    all_optimizer.push_back(optimizer);
  }
};

Timing timing_of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  return {at(0.5), at(0.9)};
}

int64_t max_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

// A RunResult that names the run: its mode, device and dtypes.
RunResult describe_run(const Mode& md, const std::string& precision, Device device) {
  RunResult r;
  r.precision = precision;
  r.device = device.str();
  r.description = md.description;
  r.params_dtype = md.params_dtype();
  r.activations_dtype = md.activations_dtype();
  r.grads_dtype = md.grads_dtype();
  r.optimizer_state_dtype = md.optimizer_state_dtype();
  r.optimizer_name = md.optimizer == OptimizerKind::sgd ? "SGD" : "Adam";
  r.compute_dtype = md.activations_dtype();
  if (device.is_cpu()) {
    r.cpu_isa = cpu::isa_name(cpu::isa());
    r.cpu_bf16_kernel = cpu::gemm::kernel_for(cpu::gemm::Operands::bf16).name;
    if (cpu::features().avx512_bf16 && cpu::isa() != cpu::Isa::avx2) r.cpu_dot_vs_fma = cpu::gemm::avx512_bf16_dot_vs_fma();
  }
  return r;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Mode& md, const NamedParams& params, double lr) {
  std::unique_ptr<optim::Optimizer> opt;
  if (md.optimizer == OptimizerKind::sgd)
    opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = lr * kSgdLrFactor, .momentum = kSgdMomentum});
  else
    opt = std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = lr});
  opt->set_state_in_param_dtype(md.recipe.optimizer_state_in_param_dtype);
  return opt;
}

// What the run measured over all its steps: speed, timings, memory, the final loss.
void finish_run(RunResult& r, const Config& cfg, const PhaseTimes& times, Device device) {
  r.total_seconds = r.curves.seconds.empty() ? 0 : r.curves.seconds.back();
  r.images_per_s = r.total_seconds > 0 ? static_cast<double>(r.steps_done * cfg.batch) / r.total_seconds : 0;
  r.step = timing_of(times.all_step);
  r.forward = timing_of(times.all_forward);
  r.backward = timing_of(times.all_backward);
  r.optimizer = timing_of(times.all_optimizer);
  for (const UpdateSample& u : r.updates) r.adam_v_flushed_fraction = std::max(r.adam_v_flushed_fraction, u.v_flushed_fraction);
  r.peak_bytes = memory_stats(device).peak;
  r.max_rss_bytes = max_rss_bytes();
  std::vector<double> finite;
  for (double l : r.curves.loss)
    if (std::isfinite(l)) finite.push_back(l);
  double fl = 0;
  const size_t k = std::min<size_t>(10, finite.size());
  for (size_t i = finite.size() - k; i < finite.size(); ++i) fl += finite[i];
  r.final_loss = k ? fl / static_cast<double>(k) : NAN;
}

}  // namespace

Tensor segmentation_loss(const Tensor& logits, const Tensor& target) {
  Tensor ce = cross_entropy(logits, target);
  Tensor dice = soft_dice(softmax(logits, -1), target);
  Tensor fg = mean(dice.narrow(0, 1, dice.size(0) - 1));
  return ce + rsub(fg, 1.0);
}

ValidationSet make_validation_set(const Config& cfg) {
  ValidationSet v;
  for (int64_t i = 0; i < cfg.val_images; i += 16) {
    const int64_t n = std::min<int64_t>(16, cfg.val_images - i);
    v.batches.push_back(make_batch(cfg.seed, 1, static_cast<uint64_t>(i), n, cfg.size));
  }
  v.images = cfg.val_images;
  return v;
}

RunResult train_run(const Config& cfg, const std::string& precision, Device device, const ValidationSet& val,
                    const ProgressFn& progress) {
  const Mode md = mode(precision);
  const amp::Recipe& rc = md.recipe;
  RunResult r = describe_run(md, precision, device);

  manual_seed(cfg.seed);  // identical initial weights in every run
  UNet model(1, kNumClasses, cfg.width, cfg.depth);
  model.to(device);
  if (rc.policy.params != f32) amp::cast_model(model, rc.policy.params, rc.policy.keep_batchnorm_f32);
  std::unique_ptr<amp::MasterWeights> mw;
  if (rc.master_weights) mw = std::make_unique<amp::MasterWeights>(model.named_parameters());
  const NamedParams opt_params = mw ? mw->params() : model.named_parameters();
  const std::unique_ptr<optim::Optimizer> opt_owner = make_optimizer(md, opt_params, cfg.lr);
  optim::Optimizer& opt = *opt_owner;
  optim::CosineAnnealingLR sched(opt, cfg.steps);
  amp::GradScaler scaler(amp::GradScalerOptions{.growth_interval = cfg.growth_interval, .enabled = rc.loss_scaling}, device);
  const auto ddp = attach_distributed(model, scaler);  // null with one process
  const DType input_dtype = rc.policy.params;
  std::vector<Tensor> clipped;
  for (auto& [n, p] : opt_params) clipped.push_back(p);

  // The instruments, in the order each step point calls them.
  StepHooks hooks;
  if (cfg.monitor_every > 0) hooks.add<MonitorHook>(model, cfg.monitor_every, r);
  // The fallback switches modules, so only where autocast computes.
  if (cfg.fallback_strikes > 0 && rc.autocast) hooks.add<FallbackHook>(model, cfg.fallback_strikes, r, bool(progress));
  if (!cfg.dump.empty()) hooks.add<DumpFirstStep>(cfg, precision, model, opt_params);
  if (cfg.profile_ops_step >= 0) hooks.add<OpProfileHook>(cfg, r);
  hooks.add<UnderflowSampler>(model, r);
  hooks.add<UpdateProbeHook>(opt, r);
  hooks.add<CurveRecorder>(opt, cfg.lr, r, bool(progress));
  if (cfg.eval_every > 0) hooks.add<PeriodicEval>(cfg, model, val, input_dtype, rc.autocast, r);
  if (progress) hooks.add<ProgressHook>(progress, cfg.batch);

  PhaseTimes times;
  reset_peak_memory(device);
  BatchStream batches(cfg);
  const auto start = Clock::now();
  for (int64_t step = 0; step < cfg.steps; ++step) {
    const Batch batch = batches.next(step);
    // Not the last step: the cosine schedule's lr is ~0 there and every update is tiny.
    StepState s{.step = step, .steps = cfg.steps,
                .sampled = cfg.monitor_every > 0 && step % cfg.monitor_every == 0 && step + 1 < cfg.steps,
                .batch = &batch};
    hooks.before_step(s);
    PhaseClock clock;
    Tensor x = batch.image.to(device, input_dtype), y = batch.label.to(device);
    s.scale = scaler.get_scale();
    {
      std::optional<amp::Autocast> ac;
      if (rc.autocast) ac.emplace(*rc.autocast);  // lower ops in f16/bf16, fp32 ops in f32
      s.logits = model(x);
      hooks.on_logits(s, s.logits);
      if (rc.policy.output != s.logits.dtype()) s.logits = s.logits.to(rc.policy.output);
      s.loss = segmentation_loss(s.logits, y);
    }
    s.loss_value = s.loss.item<double>();
    clock.lap(times.forward);
    scaler.scale(s.loss).backward();  // the scale is a node in the graph
    if (mw) mw->copy_grads_to_master();
    clock.lap(times.backward);
    hooks.after_backward(s);
    scaler.unscale_(opt);  // one fused pass: unscale + inf/NaN check
    hooks.after_unscale(s);
    optim::clip_grad_norm_(clipped, cfg.clip);
    // Without a scaler a non-finite loss stops the run (below); its NaN update is not applied.
    s.stopping = !std::isfinite(s.loss_value) && !rc.loss_scaling;
    if (!s.stopping) {
      hooks.before_optimizer_step(s);
      s.result = scaler.step(opt);  // skipped when a gradient is not finite
    }
    scaler.update();
    hooks.after_optimizer_step(s);
    if (mw) mw->copy_master_to_model();
    sched.step();
    opt.zero_grad();
    model.zero_grad();
    clock.lap(times.optimizer, s.untimed_ms);
    times.keep(step >= 2);  // the first steps pay one-time costs
    s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    hooks.after_step(s);
    if (s.stopping) {
      r.stopped_early = true;
      r.stop_reason = "non-finite loss (" + std::to_string(s.loss_value) + ") at step " + std::to_string(step);
      break;
    }
  }
  batches.wait();  // the data thread is idle before the final evaluation
  hooks.after_run();
  finish_run(r, cfg, times, device);

  Metrics m = evaluate(model, val.batches, val.images, input_dtype, rc.autocast, 4);
  r.val_dice = m.dice;
  r.val_iou = m.iou;
  r.val_dice_mean_fg = m.dice_mean_fg;
  r.val_iou_mean_fg = m.iou_mean_fg;
  r.sample_predictions = m.predictions;
  r.curves.eval_step.push_back(r.steps_done);
  r.curves.eval_seconds.push_back(r.total_seconds);
  r.curves.eval_dice.push_back(m.dice_mean_fg);
  return r;
}

}  // namespace hg::segbench
