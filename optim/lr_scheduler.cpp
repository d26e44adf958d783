// The learning-rate schedulers: closed forms of PyTorch's StepLR, MultiStepLR,
// CosineAnnealingLR (plus LinearLR warmup), OneCycleLR, and ReduceLROnPlateau's counters.
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "framework/warning.h"

namespace hg::optim {

namespace {

std::string group_key(const char* prefix, size_t g) { return prefix + std::to_string(g); }

}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer, const char* name)
    : optimizer_(optimizer), name_(name), optimizer_steps_at_start_(optimizer.steps_called()) {
  for (const ParamGroup& group : optimizer.param_groups()) base_lrs_.push_back(group.lr.value_or(0.0));
  last_lr_ = base_lrs_;
}

void LRScheduler::check(bool ok, const char* what, double value, const char* valid) const {
  HG_CHECK(ok, name_, ": ", what, " must be ", valid, ", got ", value);
}

void LRScheduler::start() {
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) lrs.push_back(lr_at(0, g));
  set_lrs(0, lrs);
}

void LRScheduler::set_lrs(int64_t epoch, const std::vector<double>& lrs) {
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  for (size_t g = 0; g < lrs.size(); ++g) groups[g].lr = lrs[g];
  last_lr_ = lrs;
  last_epoch_ = epoch;
}

void LRScheduler::step() {
  HG_CHECK(optimizer_.param_groups().size() == base_lrs_.size(), name_, ".step: the optimizer has ",
           optimizer_.param_groups().size(), " parameter groups but the scheduler was made for ", base_lrs_.size(),
           " (make a new scheduler after add_param_group)");
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) lrs.push_back(lr_at(last_epoch_ + 1, g));
  if (last_epoch_ == 0 && optimizer_.steps_called() == optimizer_steps_at_start_)
    warn(detail::concat(name_, ".step() was called before the optimizer's first step() (since the scheduler was made): "
                        "the lr of epoch 0 was never used by an update, so the schedule's first value is skipped. "
                        "Call optimizer.step() first, then scheduler.step()"));
  set_lrs(last_epoch_ + 1, lrs);
}

StateDict LRScheduler::state_dict() const {
  StateDict sd;
  auto put = [&](const std::string& key, double v) { sd[key] = scalar_tensor(v, {f64}); };
  put("last_epoch", static_cast<double>(last_epoch_));
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    put(group_key("base_lr.", g), base_lrs_[g]);
    put(group_key("last_lr.", g), last_lr_[g]);
  }
  for (const std::string& key : extra_keys()) put(key, extra_value(key));
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd) {
  std::vector<std::string> keys{"last_epoch"};
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    keys.push_back(group_key("base_lr.", g));
    keys.push_back(group_key("last_lr.", g));
  }
  for (const std::string& key : extra_keys()) keys.push_back(key);

  std::vector<std::string> problems;
  std::map<std::string, double> values;
  for (const std::string& key : keys) {
    auto it = sd.find(key);
    if (it == sd.end()) problems.push_back("missing '" + key + "'");
    else if (!it->second.defined() || it->second.dim() != 0) problems.push_back("'" + key + "' must be a 0-d tensor");
    else values[key] = it->second.item<double>();
  }
  for (const auto& [key, t] : sd)
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) problems.push_back("unexpected '" + key + "'");
  if (values.count("last_epoch")) {
    const double e = values["last_epoch"];
    if (!(e >= 0 && e == std::floor(e) && e < 9.0e15))
      problems.push_back(detail::concat("'last_epoch' must be a whole number >= 0, got ", e));
  }
  if (!problems.empty()) {
    std::string msg = detail::concat(name_, ".load_state_dict: nothing was loaded:");
    for (const std::string& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  last_epoch_ = static_cast<int64_t>(values["last_epoch"]);
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    base_lrs_[g] = values[group_key("base_lr.", g)];
    last_lr_[g] = values[group_key("last_lr.", g)];
    // The optimizer runs with the restored lr whichever of the two was loaded first.
    optimizer_.param_groups()[g].lr = last_lr_[g];
  }
  for (const std::string& key : extra_keys()) set_extra_value(key, values[key]);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  check(step_size > 0, "step_size", static_cast<double>(step_size), "> 0");
  check(gamma > 0, "gamma", gamma, "> 0");
  start();
}

double StepLR::lr_at(int64_t epoch, size_t g) const {
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  for (int64_t m : milestones_) check(m >= 0, "every milestone", static_cast<double>(m), ">= 0");
  check(gamma > 0, "gamma", gamma, "> 0");
  std::sort(milestones_.begin(), milestones_.end());
  start();
}

double MultiStepLR::lr_at(int64_t epoch, size_t g) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(passed));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min, int64_t warmup_steps,
                                     double warmup_start_factor)
    : LRScheduler(optimizer, "CosineAnnealingLR"),
      t_max_(T_max),
      warmup_steps_(warmup_steps),
      eta_min_(eta_min),
      warmup_start_factor_(warmup_start_factor) {
  check(T_max > 0, "T_max", static_cast<double>(T_max), "> 0");
  check(eta_min >= 0, "eta_min", eta_min, ">= 0");
  check(warmup_steps >= 0 && warmup_steps < T_max, "warmup_steps", static_cast<double>(warmup_steps),
        "in [0, T_max)");
  check(warmup_start_factor >= 0 && warmup_start_factor <= 1, "warmup_start_factor", warmup_start_factor,
        "in [0, 1]");
  start();
}

double CosineAnnealingLR::lr_at(int64_t epoch, size_t g) const {
  const double base = base_lrs_[g];
  if (epoch < warmup_steps_)
    return base * (warmup_start_factor_ +
                   (1.0 - warmup_start_factor_) * static_cast<double>(epoch) / static_cast<double>(warmup_steps_));
  const double t = static_cast<double>(epoch - warmup_steps_) / static_cast<double>(t_max_ - warmup_steps_);
  return eta_min_ + (base - eta_min_) * (1.0 + std::cos(std::numbers::pi * t)) / 2.0;
}

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start,
                       double div_factor, double final_div_factor)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr), total_steps, pct_start,
                 div_factor, final_div_factor) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps, double pct_start,
                       double div_factor, double final_div_factor)
    : LRScheduler(optimizer, "OneCycleLR"),
      max_lrs_(std::move(max_lrs)),
      total_steps_(total_steps),
      pct_start_(pct_start),
      div_factor_(div_factor),
      final_div_factor_(final_div_factor) {
  HG_CHECK(max_lrs_.size() == base_lrs_.size(), "OneCycleLR: got ", max_lrs_.size(), " max_lrs for ",
           base_lrs_.size(), " parameter groups (give one per group)");
  for (double m : max_lrs_) check(m >= 0, "max_lr", m, ">= 0");
  check(total_steps > 0, "total_steps", static_cast<double>(total_steps), "> 0");
  check(pct_start >= 0 && pct_start <= 1, "pct_start", pct_start, "in [0, 1]");
  check(div_factor > 0, "div_factor", div_factor, "> 0");
  check(final_div_factor > 0, "final_div_factor", final_div_factor, "> 0");
  for (size_t g = 0; g < base_lrs_.size(); ++g) base_lrs_[g] = max_lrs_[g] / div_factor_;
  start();
}

double OneCycleLR::lr_at(int64_t epoch, size_t g) const {
  HG_CHECK(epoch <= total_steps_, "OneCycleLR.step: stepped to step ", epoch, " but total_steps is ", total_steps_,
           " (make total_steps cover every step)");
  const double initial = max_lrs_[g] / div_factor_;
  const double min_lr = initial / final_div_factor_;
  const double warm_end = pct_start_ * static_cast<double>(total_steps_) - 1.0;
  const double last = static_cast<double>(total_steps_) - 1.0;
  const double step = static_cast<double>(epoch);
  // PyTorch's two phases: [0, warm_end] from initial to max, then to min_lr at `last`.
  const bool warming = step <= warm_end;
  const double from = warming ? initial : max_lrs_[g], to = warming ? max_lrs_[g] : min_lr;
  const double begin = warming ? 0.0 : warm_end, end = warming ? warm_end : last;
  // A phase of zero length is at its end (PyTorch divides by zero there).
  const double pct = end > begin ? (step - begin) / (end - begin) : 1.0;
  return to + (from - to) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, PlateauOptions options)
    : LRScheduler(optimizer, "ReduceLROnPlateau"),
      options_(options),
      best_(options.mode == PlateauOptions::Mode::min ? std::numeric_limits<double>::infinity()
                                      : -std::numeric_limits<double>::infinity()) {
  check(options.factor >= 0 && options.factor < 1, "factor", options.factor, "in [0, 1)");
  check(options.patience >= 0, "patience", static_cast<double>(options.patience), ">= 0");
  check(options.threshold >= 0, "threshold", options.threshold, ">= 0");
  check(options.cooldown >= 0, "cooldown", static_cast<double>(options.cooldown), ">= 0");
  check(options.min_lr >= 0, "min_lr", options.min_lr, ">= 0");
}

void ReduceLROnPlateau::step() {
  throw Error("ReduceLROnPlateau.step: needs the metric it watches; call step(metric)");
}

double ReduceLROnPlateau::lr_at(int64_t, size_t g) const { return optimizer_.param_groups()[g].lr.value_or(base_lrs_[g]); }

bool ReduceLROnPlateau::is_better(double metric) const {
  const double t = options_.threshold;
  const bool rel = options_.threshold_mode == PlateauOptions::Threshold::rel;
  if (options_.mode == PlateauOptions::Mode::min) return metric < (rel ? best_ * (1.0 - t) : best_ - t);
  return metric > (rel ? best_ * (t + 1.0) : best_ + t);
}

void ReduceLROnPlateau::step(double metric) {
  HG_CHECK(optimizer_.param_groups().size() == base_lrs_.size(), "ReduceLROnPlateau.step: the optimizer has ",
           optimizer_.param_groups().size(), " parameter groups but the scheduler was made for ", base_lrs_.size());
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) lrs.push_back(lr_at(last_epoch_ + 1, g));
  if (num_bad_epochs_ > options_.patience) {
    for (double& lr : lrs) {
      const double reduced = std::max(lr * options_.factor, options_.min_lr);
      if (lr - reduced > 1e-8) lr = reduced;
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  set_lrs(last_epoch_ + 1, lrs);
}

std::vector<std::string> ReduceLROnPlateau::extra_keys() const {
  return {"best", "num_bad_epochs", "cooldown_counter"};
}

double ReduceLROnPlateau::extra_value(const std::string& key) const {
  if (key == "best") return best_;
  return static_cast<double>(key == "num_bad_epochs" ? num_bad_epochs_ : cooldown_counter_);
}

void ReduceLROnPlateau::set_extra_value(const std::string& key, double value) {
  if (key == "best") best_ = value;
  else if (key == "num_bad_epochs") num_bad_epochs_ = static_cast<int64_t>(value);
  else cooldown_counter_ = static_cast<int64_t>(value);
}

}  // namespace hg::optim
