// The training loop of one run: the precision recipe (autocast, parameter dtype, master
// weights, loss scaling), Adam (or SGD) with cosine decay and clipping of unscaled gradients,
// timings per phase, gradient statistics and update/weight ratios at sampled steps, validation.
#include "bench/segbench/train.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <future>
#include <memory>

#include "amp/autocast.h"
#include "amp/fp32_fallback.h"
#include "framework/cpu/threads.h"
#include "amp/grad_scaler.h"
#include "amp/master_weights.h"
#include "amp/numerics_monitor.h"
#include "amp/policy.h"
#include "bench/segbench/distributed.h"
#include "bench/segbench/evaluate.h"
#include "bench/segbench/grad_stats.h"
#include "bench/segbench/modes.h"
#include "bench/segbench/profile_section.h"
#include "bench/segbench/update_stats.h"
#include "framework/allocator.h"
#include "framework/cpu/isa.h"
#include "optim/adam.h"
#include "framework/profiler.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "framework/serialize/safetensors.h"
#include "models/unet.h"
#include "framework/generator.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/softmax.h"

namespace hg::segbench {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

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

void dump_first_step(const Config& cfg, const std::string& precision, const StateDict& before, const Batch& batch,
                     const Tensor& logits, const Tensor& loss, const std::vector<std::pair<std::string, Tensor>>& params) {
  StateDict sd = before;
  sd["input"] = batch.image;
  sd["target"] = batch.label;
  sd["logits"] = logits.detach().to(f32);
  sd["loss"] = loss.detach().to(f32);
  for (auto& [name, p] : params)
    if (p.grad().defined()) sd["grad." + name] = p.grad().to(f32);
  save_safetensors(cfg.dump + "/" + precision + ".safetensors", sd, {{"precision", precision}});
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
  if (device.is_cpu()) r.cpu_isa = cpu::isa_name(cpu::isa());

  manual_seed(cfg.seed);  // identical initial weights in every run
  UNet model(1, kNumClasses, cfg.width, cfg.depth);
  model.to(device);
  if (rc.policy.params != f32) amp::cast_model(model, rc.policy.params, rc.policy.keep_batchnorm_f32);
  std::unique_ptr<amp::MasterWeights> mw;
  if (rc.master_weights) mw = std::make_unique<amp::MasterWeights>(model.named_parameters());
  const auto opt_params = mw ? mw->params() : model.named_parameters();
  std::unique_ptr<optim::Optimizer> opt_owner;
  if (md.optimizer == OptimizerKind::sgd)
    opt_owner = std::make_unique<optim::SGD>(opt_params, optim::SGDOptions{.lr = cfg.lr * kSgdLrFactor, .momentum = kSgdMomentum});
  else
    opt_owner = std::make_unique<optim::Adam>(opt_params, optim::AdamOptions{.lr = cfg.lr});
  optim::Optimizer& opt = *opt_owner;
  opt.set_state_in_param_dtype(rc.optimizer_state_in_param_dtype);
  optim::CosineAnnealingLR sched(opt, cfg.steps);
  amp::GradScalerOptions so;
  so.enabled = rc.loss_scaling;
  so.growth_interval = cfg.growth_interval;
  amp::GradScaler scaler(so, device);
  const auto ddp = attach_distributed(model, scaler);  // null with one process
  const DType input_dtype = rc.policy.params == f32 ? f32 : rc.policy.params;
  std::optional<amp::NumericsMonitor> monitor;
  if (cfg.monitor_every > 0) monitor.emplace(model, amp::MonitorOptions{.every = cfg.monitor_every});
  std::optional<amp::Fp32Fallback> fallback;  // switches modules, so only where autocast computes
  if (cfg.fallback_strikes > 0 && rc.autocast) fallback.emplace(model, amp::FallbackOptions{.strikes = cfg.fallback_strikes});
  int64_t skip_lines = 0;

  std::vector<double> t_step, t_fwd, t_bwd, t_opt;
  reset_peak_memory(device);
  auto fetch = [&](int64_t step) {
    ThreadLimit one(1);  // the training loop owns the cores; this thread only prepares data
    return make_batch(cfg.seed, 0, first_image_of(step, cfg.batch), cfg.batch, cfg.size);
  };
  std::future<Batch> next = std::async(std::launch::async, fetch, 0);
  const auto start = Clock::now();
  for (int64_t step = 0; step < cfg.steps; ++step) {
    Batch batch = next.get();
    if (step == cfg.poison_step) {
      batch.image = batch.image.contiguous().clone();
      batch.image.data<float>()[0] = NAN;
    }
    if (step + 1 < cfg.steps) next = std::async(std::launch::async, fetch, step + 1);
    // Not the last step: the cosine schedule's lr is ~0 there and every update is tiny.
    const bool sampled = cfg.monitor_every > 0 && step % cfg.monitor_every == 0 && step + 1 < cfg.steps;
    StateDict before;
    if (step == 0 && !cfg.dump.empty()) {
      NoGrad ng;
      for (auto& [k, v] : model.state_dict()) before[k] = v.to(f32).clone();
    }
    if (monitor) monitor->begin_step(step);
    if (fallback) fallback->begin_step(step);
    std::optional<Profiler> profiler;
    if (cfg.profile_ops_step >= 0 && step >= cfg.profile_ops_step && step < cfg.profile_ops_step + kProfiledSteps)
      profiler.emplace(true);  // without the next batch's preparation
    const auto t0 = Clock::now();
    Tensor x = batch.image.to(device, input_dtype), y = batch.label.to(device);
    Tensor logits, loss;
    UnderflowSample us;
    const double scale_now = scaler.get_scale();
    {
      std::optional<amp::Autocast> ac;
      if (rc.autocast) ac.emplace(*rc.autocast);
      logits = model(x);
      // The output's gradient as backward stores it: before any Cast widens it to f32.
      if (sampled)
        logits.register_hook([&us, scale_now](const Tensor& g) {
          us.logits = gradient_exponents(g, scale_now);
          return Tensor();
        });
      if (rc.policy.output != logits.dtype()) logits = logits.to(rc.policy.output);
      loss = segmentation_loss(logits, y);
    }
    const double loss_value = loss.item<double>();
    const double f_ms = ms_since(t0);
    const auto t1 = Clock::now();
    scaler.scale(loss).backward();
    if (mw) mw->copy_grads_to_master();
    const double b_ms = ms_since(t1);
    const auto t2 = Clock::now();
    // Where backward stored them: the model's parameters (f16 ones for amp-master).
    if (sampled) {
      ProfilePause pause;  // segbench's own statistics are not the step's ops
      us.layers = stored_gradient_stats(model.named_parameters(), scale_now);
    }
    scaler.unscale_(opt);
    if (monitor) monitor->end_step();  // weight gradients unscaled, before clipping
    if (step == 0 && !cfg.dump.empty()) dump_first_step(cfg, precision, before, batch, logits, loss, opt_params);
    std::vector<Tensor> plist;
    for (auto& [n, p] : opt_params) plist.push_back(p);
    optim::clip_grad_norm_(plist, cfg.clip);
    if (sampled) us.step = step;
    // Without a scaler a non-finite loss stops the run (below); its NaN update is not applied.
    const bool stopping = !std::isfinite(loss_value) && !rc.loss_scaling;
    // The probe copies every parameter to the host; its time is kept out of the step's
    // timing and out of the op profile.
    std::optional<UpdateProbe> probe;
    auto tp = Clock::now();
    if (!stopping && (sampled || step < kFirstUpdateSteps)) {
      ProfilePause pause;
      probe.emplace(opt);
    }
    double probe_ms = ms_since(tp);
    amp::StepResult res = stopping ? amp::StepResult{} : scaler.step(opt);
    tp = Clock::now();
    if (probe) {
      ProfilePause pause;
      r.updates.push_back(probe->measure(step, res.skipped()));
    }
    probe_ms += ms_since(tp);
    scaler.update();
    if (fallback) {
      const size_t known = fallback->events().size();
      fallback->end_step(&res);
      for (size_t k = known; k < fallback->events().size(); ++k) {
        const amp::FallbackEvent& e = fallback->events()[k];
        r.fallback_events.push_back({e.step, e.module, e.reason});
        if (progress)
          std::printf("\n%s: step %lld: %s now runs in f32: %s\n", precision.c_str(), static_cast<long long>(e.step),
                      e.module.c_str(), e.reason.c_str());
      }
    }
    if (mw) mw->copy_master_to_model();
    sched.step();
    opt.zero_grad();
    model.zero_grad();
    const double o_ms = ms_since(t2) - probe_ms;
    if (profiler) finish_op_profile(*profiler, cfg, precision, step, r.op_profile);
    if (sampled) {
      // Weight elements whose update was rounded away (0 on a skipped step: nothing was proposed).
      if (probe)
        for (const LayerUpdate& l : r.updates.back().layers)
          for (LayerStats& ls : us.layers)
            if (ls.name == l.name) ls.update_lost_fraction = l.unchanged_fraction;
      r.underflow.push_back(std::move(us));
    }
    if (step >= 2) {  // the first steps pay one-time costs
      t_step.push_back(f_ms + b_ms + o_ms);
      t_fwd.push_back(f_ms);
      t_bwd.push_back(b_ms);
      t_opt.push_back(o_ms);
    }
    const bool skipped = res.skipped();
    if (skipped) {
      r.skipped_steps.push_back(step);
      auto bad = res.nonfinite();
      if (!bad.empty() && r.nonfinite_params.size() < 20) r.nonfinite_params.emplace_back(step, bad);
      // The training log names the parameters of the first few skipped steps.
      if (progress && ++skip_lines <= 5)
        std::printf("\n%s: step %lld: %s\n", precision.c_str(), static_cast<long long>(step), res.summary().c_str());
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    r.curves.step.push_back(step);
    r.curves.seconds.push_back(secs);
    r.curves.loss.push_back(loss_value);
    r.curves.scale.push_back(scale_now);
    r.curves.lr.push_back(opt.param_groups()[0].lr.value_or(cfg.lr));
    r.steps_done = step + 1;
    if (!std::isfinite(loss_value) && !r.first_nonfinite_step) r.first_nonfinite_step = step;

    double dice = NAN;
    if (cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0 && step + 1 < cfg.steps) {
      Metrics m = evaluate(model, val.batches, cfg.eval_subset, input_dtype, rc.autocast);
      dice = m.dice_mean_fg;
      r.curves.eval_step.push_back(step + 1);
      r.curves.eval_seconds.push_back(secs);
      r.curves.eval_dice.push_back(dice);
    }
    if (progress) progress(step, cfg.steps, loss_value, dice, scale_now, (step + 1) * cfg.batch / std::max(secs, 1e-9));
    if (stopping) {
      r.stopped_early = true;
      r.stop_reason = "non-finite loss (" + std::to_string(loss_value) + ") at step " + std::to_string(step);
      break;
    }
  }
  if (next.valid()) next.wait();
  r.total_seconds = r.curves.seconds.empty() ? 0 : r.curves.seconds.back();
  r.images_per_s = r.total_seconds > 0 ? static_cast<double>(r.steps_done * cfg.batch) / r.total_seconds : 0;
  r.step = timing_of(t_step);
  r.forward = timing_of(t_fwd);
  r.backward = timing_of(t_bwd);
  r.optimizer = timing_of(t_opt);
  if (monitor) {
    r.numerics_worst = monitor->worst_table(8);
    r.numerics_jsonl = monitor->jsonl();
  }
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
