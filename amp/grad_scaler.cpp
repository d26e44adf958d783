// GradScaler: the scale node (whose mark tells clipping the gradients still carry the
// scale), the fused unscale/check, skipping, the scale update and its state dict.
#include "amp/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "framework/autograd.h"
#include "framework/warning.h"
#include "ops/amp_kernels.h"
#include "ops/concat.h"
#include "ops/copy.h"
#include "ops/elementwise.h"

namespace hg {
DispatchStub<void(const std::vector<Tensor>&, const Tensor&, const Tensor&, const Tensor&)> unscale_and_check_stub(
    "unscale_and_check");
DispatchStub<void(const ScaleState&, const Tensor&, const ScaleUpdateParams&)> update_scale_stub("update_scale");
}  // namespace hg

namespace hg::amp {

namespace {

// A loss scale, growth factor or interval as a checked number: a defined one-element
// tensor of an allowed kind. Throws naming the entry otherwise.
double entry_value(const StateDict& sd, const std::string& key, bool integer) {
  const Tensor& t = sd.at(key);
  HG_CHECK(t.defined() && t.numel() == 1 && t.dim() <= 1, "GradScaler.load_state_dict: '", key,
           "' must be a one-element tensor, got ", t.defined() ? "shape " + shape_str(t.shape()) : "an undefined tensor");
  const bool ok_dtype = integer ? (t.dtype() == i64 || is_floating(t.dtype())) : is_floating(t.dtype());
  HG_CHECK(ok_dtype, "GradScaler.load_state_dict: '", key, "' must be ", integer ? "an integer or floating" : "a floating",
           " tensor, got ", dtype_name(t.dtype()));
  if (t.dtype() == i64) return static_cast<double>(t.item<int64_t>());
  return t.item<double>();
}

// An integer count stored as a number: finite, whole and within [lo, 2^63).
int64_t entry_int(const StateDict& sd, const std::string& key, int64_t lo) {
  const double v = entry_value(sd, key, true);
  HG_CHECK(std::isfinite(v) && v == std::floor(v) && v >= static_cast<double>(lo) && v < 0x1p63,
           "GradScaler.load_state_dict: '", key, "' must be a whole number in [", lo, ", 2^63), got ", v);
  return static_cast<int64_t>(v);
}

// A tracker: an i64 one-element tensor in [lo, hi].
void check_tracker(const StateDict& sd, const std::string& key, int64_t lo, int64_t hi) {
  const Tensor& t = sd.at(key);
  HG_CHECK(t.defined() && t.numel() == 1 && t.dim() <= 1 && t.dtype() == i64, "GradScaler.load_state_dict: '", key,
           "' must be a one-element i64 tensor, got ",
           t.defined() ? detail::concat(dtype_name(t.dtype()), " of shape ", shape_str(t.shape())) : "an undefined tensor");
  const int64_t v = t.item<int64_t>();
  HG_CHECK(v >= lo && v <= hi, "GradScaler.load_state_dict: '", key, "' must be ",
           lo == INT64_MIN ? detail::concat("at most ", hi) : detail::concat("in [", lo, ", ", hi, "]"), ", got ", v);
}

}  // namespace

bool StepResult::skipped() const { return found_inf.defined() && found_inf.item<double>() != 0.0; }
double StepResult::scale_value() const { return scale.defined() ? scale.item<double>() : 1.0; }

std::vector<std::pair<std::string, int64_t>> StepResult::nonfinite() const {
  std::vector<std::pair<std::string, int64_t>> out;
  if (!nonfinite_counts.defined()) return out;
  std::vector<int64_t> c = nonfinite_counts.to_vector<int64_t>();
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i] > 0) out.emplace_back(names[i], c[i]);
  return out;
}

std::string StepResult::summary() const {
  if (!skipped()) return "";
  auto bad = nonfinite();
  std::string s = "step skipped at loss scale " + detail::concat(scale_value()) + ": non-finite gradients in " +
                  std::to_string(bad.size()) + " of " + std::to_string(names.size()) + " parameters";
  for (size_t i = 0; i < bad.size(); ++i) {
    if (i == 8) {
      s += ", ... (" + std::to_string(bad.size() - 8) + " more)";
      break;
    }
    const auto at = std::find(names.begin(), names.end(), bad[i].first) - names.begin();
    s += (i ? ", " : ": ") + bad[i].first + " (" + std::to_string(bad[i].second) + " of " +
         std::to_string(numels[static_cast<size_t>(at)]) + ")";
  }
  return s;
}

GradScaler::GradScaler(GradScalerOptions o, Device device) : opt_(o), device_(device) {
  HG_CHECK(o.init_scale > 0 && std::isfinite(o.init_scale), "GradScaler: init_scale must be finite and > 0, got ",
           o.init_scale);
  HG_CHECK(o.growth_factor > 1.0, "GradScaler: growth_factor must be > 1, got ", o.growth_factor);
  HG_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1.0, "GradScaler: backoff_factor must be in (0, 1), got ",
           o.backoff_factor);
  HG_CHECK(o.growth_interval > 0, "GradScaler: growth_interval must be > 0, got ", o.growth_interval);
  HG_CHECK(o.hysteresis >= 1, "GradScaler: hysteresis must be >= 1, got ", o.hysteresis);
  HG_CHECK(o.min_scale >= kLowestMinScale && o.min_scale <= o.init_scale && o.init_scale <= o.max_scale,
           "GradScaler: need 2^-126 <= min_scale <= init_scale <= max_scale, got ", o.min_scale, ", ", o.init_scale,
           ", ", o.max_scale, " (min_scale is the floor the scale never backs off below; a scale under 2^-126 could "
           "never recover, since 1/scale is then not a finite f32; the default is 2^-24)");
  HG_CHECK(o.skip_streak_limit >= 0, "GradScaler: skip_streak_limit must be >= 0 (0: never report), got ",
           o.skip_streak_limit);
  scale_ = full({}, o.init_scale, {f32, device});
  growth_tracker_ = zeros({}, {i64, device});
  hysteresis_tracker_ = full({}, static_cast<double>(o.hysteresis), {i64, device});
  skip_streak_ = zeros({}, {i64, device});
}

GradScaler::~GradScaler() = default;

Tensor GradScaler::scale(const Tensor& loss) {
  if (!opt_.enabled) return loss;
  HG_CHECK(loss.defined() && is_floating(loss.dtype()), "GradScaler.scale: expected a floating loss tensor");
  HG_CHECK(loss.device() == device_, "GradScaler.scale: the loss is on ", loss.device(), " but the scaler on ", device_);
  scaled_since_update_ = true;
  Tensor l32 = loss.to(f32);
  Tensor y;
  {
    NoGrad ng;
    y = l32 * scale_;
  }
  if (!mark_) {
    NoGrad ng;
    mark_ = std::make_shared<LossScaleMark>(LossScaleMark{scale_.clone()});
  }
  autograd::record_scaled("scale_loss", l32, y, [s = scale_](const Tensor& g) { return TensorList{g * s}; }, mark_);
  return y;
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!opt_.enabled) return;
  PerOptimizer& st = per_opt_[&opt];
  HG_CHECK(scaled_since_update_, "GradScaler: unscale_/step on this ", opt.name(),
           " optimizer, but no loss was scaled since the last update() (PyTorch: \"_scale is None\"): its gradients "
           "do not carry the loss scale, and dividing them by it would shrink the step. Call "
           "scaler.scale(loss).backward() earlier in the iteration");
  HG_CHECK(st.stage != Stage::unscaled, "GradScaler.unscale_: already called on this ", opt.name(),
           " optimizer since the last update(); call it once per optimizer per step");
  HG_CHECK(st.stage != Stage::stepped, "GradScaler.unscale_: called after step(); unscale_ must come before step()");
  std::vector<Tensor> grads;
  std::vector<std::string> names;
  std::vector<int64_t> numels;
  for (auto& [name, p] : opt.named_parameters()) {
    if (!p.grad().defined()) continue;
    HG_CHECK(p.grad().dtype() != f16, "GradScaler.unscale_: parameter '", name,
             "' has f16 gradients; unscaling them in f16 would round g/S to f16 again and flush every gradient at or "
             "below S x 2^-25 to zero. Keep f32 master weights "
             "(amp-master, amp::MasterWeights) or f32 parameters (amp) so the optimizer sees f32 gradients");
    HG_CHECK(p.grad().device() == device_, "GradScaler.unscale_: parameter '", name, "' has its gradient on ",
             p.grad().device(), " but the scaler is on ", device_);
    if (!p.grad().is_contiguous()) {
      const auto mark = autograd::loss_scale_of(p.grad());
      p.set_grad(p.grad().contiguous());
      autograd::set_loss_scale(p.grad(), mark);
    }
    grads.push_back(p.grad());
    names.push_back(name);
    numels.push_back(p.numel());
  }
  Tensor inv;
  {
    // inv_scale = 1/scale computed in f64 then rounded to f32, as PyTorch does.
    NoGrad ng;
    inv = rdiv(scale_.to(f64), 1.0).to(f32);
  }
  st.result.found_inf = zeros({}, {f32, device_});
  st.result.nonfinite_counts = zeros({static_cast<int64_t>(grads.size())}, {i64, device_});
  st.result.names = names;
  st.result.numels = numels;
  {
    NoGrad ng;
    st.result.scale = scale_.clone();
  }
  if (!grads.empty()) unscale_and_check_stub(device_, grads, inv, st.result.found_inf, st.result.nonfinite_counts);
  if (found_inf_reducer_) found_inf_reducer_(st.result.found_inf);
  for (const Tensor& g : grads) g.bump_version();  // unscaled in place
  st.stage = Stage::unscaled;
  // Only this scaler's mark: a gradient another scaler marked still carries its scale.
  for (const Tensor& g : grads)
    if (mark_ && autograd::loss_scale_of(g) == mark_) autograd::set_loss_scale(g, nullptr);
}

StepResult GradScaler::step(optim::Optimizer& opt) {
  if (!opt_.enabled) {
    opt.step();
    return {};
  }
  PerOptimizer& st = per_opt_[&opt];
  HG_CHECK(st.stage != Stage::stepped, "GradScaler.step: already called on this ", opt.name(),
           " optimizer since the last update()");
  if (st.stage == Stage::ready) unscale_(opt);
  HG_CHECK(!st.result.names.empty(), "GradScaler.step: No inf checks were recorded for this optimizer (PyTorch's "
           "words): none of the ", opt.named_parameters().size(), " parameters of this ", opt.name(),
           " optimizer has a gradient. Did backward reach them, or were the gradients zeroed before the step?");
  opt.step_if(st.result.found_inf);
  st.stage = Stage::stepped;
  return st.result;
}

void GradScaler::update() {
  if (!opt_.enabled) return;
  HG_CHECK(!per_opt_.empty(), "GradScaler.update: no optimizer was stepped (or unscaled) since the last update()");
  Tensor found = zeros({}, {f32, device_});
  {
    NoGrad ng;
    for (auto& [o, st] : per_opt_)
      if (st.result.found_inf.defined()) found = maximum(found, st.result.found_inf);
  }
  ScaleUpdateParams p{opt_.growth_factor, opt_.backoff_factor, opt_.growth_interval, opt_.hysteresis,
                      opt_.min_scale, opt_.max_scale};
  update_scale_stub(device_, ScaleState{scale_, growth_tracker_, hysteresis_tracker_, skip_streak_}, found, p);
  ++updates_;
  // The skip-streak watch: take an earlier read the device has finished, start this
  // update's if none is in flight (on the CPU it is done at once), report after the
  // scaler is ready for the next iteration, since the report may throw.
  StreakRead finished;
  if (opt_.skip_streak_limit > 0) {
    if (streak_read_.read.started() && streak_read_.read.ready()) finished = std::exchange(streak_read_, {});
    if (!streak_read_.read.started()) start_streak_read();
    if (!finished.read.started() && streak_read_.read.ready()) finished = std::exchange(streak_read_, {});
  }
  per_opt_.clear();
  scaled_since_update_ = false;
  mark_.reset();
  if (finished.read.started()) check_skip_streak(finished);
}

void GradScaler::update(double new_scale) {
  if (!opt_.enabled) return;
  HG_CHECK(new_scale > 0 && std::isfinite(new_scale), "GradScaler.update: new scale must be finite and > 0, got ",
           new_scale);
  fill_(scale_, new_scale);
  per_opt_.clear();
  scaled_since_update_ = false;
  mark_.reset();
}

void GradScaler::start_streak_read() {
  // [streak, scale, every optimizer's non-finite counts], one read of one small tensor.
  StreakRead r;
  NoGrad ng;
  std::vector<Tensor> parts{skip_streak_.to(f64).reshape({1}), scale_.to(f64).reshape({1})};
  for (auto& [o, st] : per_opt_) {
    if (!st.result.nonfinite_counts.defined()) continue;
    parts.push_back(st.result.nonfinite_counts.to(f64));
    r.names.insert(r.names.end(), st.result.names.begin(), st.result.names.end());
    r.numels.insert(r.numels.end(), st.result.numels.begin(), st.result.numels.end());
  }
  r.read = AsyncRead(cat(parts, 0));
  r.update_index = updates_;
  streak_read_ = std::move(r);
}

void GradScaler::check_skip_streak(StreakRead& r) {
  const Tensor v = r.read.value();
  const auto streak = static_cast<int64_t>(v.at({0}));
  const int64_t start = r.update_index - streak + 1;  // the update at which this run began
  if (streak < opt_.skip_streak_limit || start == reported_streak_start_) return;
  reported_streak_start_ = start;
  report_skip_streak(streak, v.at({1}), v.slice(0, 2, v.numel()), r);
}

void GradScaler::report_skip_streak(int64_t streak, double scale, const Tensor& counts, const StreakRead& r) {
  std::string bad;
  int64_t n_bad = 0;
  for (size_t i = 0; i < r.names.size(); ++i) {
    const auto c = static_cast<int64_t>(counts.at({static_cast<int64_t>(i)}));
    if (c == 0) continue;
    if (++n_bad <= 8) bad += detail::concat(n_bad > 1 ? ", " : "", r.names[i], " (", c, " of ", r.numels[i], ")");
  }
  if (n_bad > 8) bad += detail::concat(", ... (", n_bad - 8, " more)");
  const std::string msg = detail::concat(
      "GradScaler: the last ", streak, " steps were all skipped (skip_streak_limit ", opt_.skip_streak_limit,
      "); the loss scale has backed off to ", scale, " and the gradients are still not finite, so no scale will fix "
      "them: they are inf/NaN at any scale. Usual causes: NaN or inf in the data or the weights, or an op that is "
      "inf at any scale (sqrt, pow or div at 0, log of 0); amp::DetectAnomaly names the op. Non-finite gradients in ",
      n_bad, " of ", r.names.size(), " parameters at the latest of these steps", n_bad ? ": " : "", bad);
  if (opt_.on_skip_streak == SkipStreakAction::error) throw Error(msg);
  warn(msg);
}

double GradScaler::get_scale() const { return opt_.enabled ? scale_.item<double>() : 1.0; }

bool GradScaler::holds_scaled_grad(const Tensor& param) const {
  return mark_ && param.defined() && autograd::loss_scale_of(param.grad()) == mark_;
}

StateDict GradScaler::state_dict() const {
  if (!opt_.enabled) return {};
  auto scalar = [](double v) { return full({}, v, {f64}); };
  NoGrad ng;
  return {{"scale", scale_.to(Device::cpu()).clone()},
          {"_growth_tracker", growth_tracker_.to(Device::cpu()).clone()},
          {"_hysteresis_tracker", hysteresis_tracker_.to(Device::cpu()).clone()},
          {"_skip_streak", skip_streak_.to(Device::cpu()).clone()},
          {"growth_factor", scalar(opt_.growth_factor)},
          {"backoff_factor", scalar(opt_.backoff_factor)},
          {"growth_interval", scalar(static_cast<double>(opt_.growth_interval))},
          {"hysteresis", scalar(static_cast<double>(opt_.hysteresis))},
          {"min_scale", scalar(opt_.min_scale)},
          {"max_scale", scalar(opt_.max_scale)}};
}

void GradScaler::load_state_dict(const StateDict& sd) {
  if (!opt_.enabled) return;  // PyTorch's rule: a disabled scaler keeps no state to load
  HG_CHECK(!sd.empty(), "GradScaler.load_state_dict: the source state dict is empty, possibly because it was saved "
           "from a disabled instance of GradScaler");
  static const char* const kRequired[] = {"scale", "_growth_tracker", "growth_factor", "backoff_factor", "growth_interval"};
  static const char* const kOptional[] = {"_hysteresis_tracker", "_skip_streak", "hysteresis", "min_scale",
                                          "max_scale"};
  for (const char* k : kRequired)
    HG_CHECK(sd.count(k), "GradScaler.load_state_dict: missing entry '", k, "'; nothing was loaded");
  for (const auto& [k, t] : sd)
    HG_CHECK(std::count(std::begin(kRequired), std::end(kRequired), k) + std::count(std::begin(kOptional), std::end(kOptional), k),
             "GradScaler.load_state_dict: unexpected entry '", k, "' (a GradScaler state holds scale, _growth_tracker, "
             "growth_factor, backoff_factor, growth_interval, hysteresis, _hysteresis_tracker, _skip_streak, min_scale, "
             "max_scale)");
  // Everything is read and checked before anything changes.
  GradScalerOptions o = opt_;
  const double scale = entry_value(sd, "scale", false);
  o.growth_factor = entry_value(sd, "growth_factor", false);
  o.backoff_factor = entry_value(sd, "backoff_factor", false);
  o.growth_interval = entry_int(sd, "growth_interval", 1);
  if (sd.count("hysteresis")) o.hysteresis = entry_int(sd, "hysteresis", 1);
  if (sd.count("min_scale")) {
    o.min_scale = entry_value(sd, "min_scale", false);
    if (o.min_scale == 0) o.min_scale = kLowestMinScale;  // written before the floor existed: 0 meant none
  }
  if (sd.count("max_scale")) o.max_scale = entry_value(sd, "max_scale", false);
  // The scale lives in f32: it must be finite and > 0 there too.
  const float scale32 = static_cast<float>(scale);
  HG_CHECK(std::isfinite(scale32) && scale32 > 0, "GradScaler.load_state_dict: 'scale' must be finite and > 0 in f32, got ",
           scale, scale32 == 0 ? " (the run this state comes from had its scale collapse to 0, so every step was being "
           "skipped; start the scaler afresh: load the model and optimizer, not the scaler)" : "");
  HG_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1.0,
           "GradScaler.load_state_dict: 'growth_factor' must be finite and > 1, got ", o.growth_factor);
  HG_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1.0,
           "GradScaler.load_state_dict: 'backoff_factor' must be in (0, 1), got ", o.backoff_factor);
  HG_CHECK(std::isfinite(o.min_scale) && o.min_scale >= kLowestMinScale && !std::isnan(o.max_scale) &&
               o.min_scale <= scale && scale <= o.max_scale,
           "GradScaler.load_state_dict: need 2^-126 <= min_scale <= scale <= max_scale, got ", o.min_scale, ", ", scale,
           ", ", o.max_scale, scale < kLowestMinScale ? " (a scale this small can never recover: every step would be "
           "skipped; start the scaler afresh: load the model and optimizer, not the scaler)" : "");
  check_tracker(sd, "_growth_tracker", 0, o.growth_interval - 1);
  // A negative hysteresis tracker is an earlier version's way of saying 0.
  if (sd.count("_hysteresis_tracker")) check_tracker(sd, "_hysteresis_tracker", INT64_MIN, o.hysteresis);
  if (sd.count("_skip_streak")) check_tracker(sd, "_skip_streak", 0, INT64_MAX);
  NoGrad ng;
  opt_ = o;
  fill_(scale_, scale);
  copy_(growth_tracker_, sd.at("_growth_tracker").reshape({}));
  if (sd.count("_hysteresis_tracker")) {
    Tensor h = sd.at("_hysteresis_tracker").reshape({}).clone();
    if (h.item<int64_t>() < 0) fill_(h, 0.0);
    copy_(hysteresis_tracker_, h);
  } else {
    fill_(hysteresis_tracker_, static_cast<double>(o.hysteresis));
  }
  if (sd.count("_skip_streak")) copy_(skip_streak_, sd.at("_skip_streak").reshape({}));
  else fill_(skip_streak_, 0.0);
  // A run the loaded state is in the middle of is reported when it reaches the limit.
  streak_read_ = {};
  reported_streak_start_ = -1;
}

}  // namespace hg::amp
