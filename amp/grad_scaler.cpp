// GradScaler: the scale node, the fused unscale/check, skipping, the scale update, the
// guard against clipping gradients that still carry the scale, and its state dict.
#include "amp/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "framework/autograd.h"
#include "framework/optim/clip_grad.h"
#include "ops/amp_kernels.h"
#include "ops/copy.h"
#include "ops/elementwise.h"

namespace hg {
DispatchStub<void(const std::vector<Tensor>&, const Tensor&, const Tensor&, const Tensor&)> unscale_and_check_stub(
    "unscale_and_check");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const ScaleUpdateParams&)>
    update_scale_stub("update_scale");
}  // namespace hg

namespace hg::amp {

namespace {

// Live scalers, for the clip guard (a process usually has one or two).
std::mutex g_mu;
std::vector<const GradScaler*> g_scalers;

void refuse_scaled_clipping(const std::vector<Tensor>& params) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const GradScaler* s : g_scalers)
    for (const Tensor& p : params)
      if (p.defined() && p.grad().defined() && s->holds_scaled_grad(p))
        throw Error(detail::concat(
            "clipping gradients that are still multiplied by the loss scale S = ", s->get_scale(),
            " (parameter '", p.name(), "'): the threshold would apply to S x grad and the step would be silently ~S "
            "times too small. Call scaler.unscale_(optimizer) first: scale -> backward -> unscale_ -> clip -> step -> update"));
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
  HG_CHECK(o.min_scale >= 0 && o.min_scale <= o.init_scale && o.init_scale <= o.max_scale,
           "GradScaler: need 0 <= min_scale <= init_scale <= max_scale, got ", o.min_scale, ", ", o.init_scale, ", ",
           o.max_scale);
  scale_ = full({}, o.init_scale, {f32, device});
  growth_tracker_ = zeros({}, {i64, device});
  hysteresis_tracker_ = full({}, static_cast<double>(o.hysteresis), {i64, device});
  std::lock_guard<std::mutex> lock(g_mu);
  g_scalers.push_back(this);
  optim::set_clip_guard(&refuse_scaled_clipping);
}

GradScaler::~GradScaler() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::erase(g_scalers, this);
  if (g_scalers.empty()) optim::set_clip_guard(nullptr);
}

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
  autograd::record("scale_loss", {l32}, y, [s = scale_](const Tensor& g) { return TensorList{g * s}; });
  return y;
}

GradScaler::PerOptimizer& GradScaler::state_of(optim::Optimizer& opt) { return per_opt_[&opt]; }

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!opt_.enabled) return;
  PerOptimizer& st = state_of(opt);
  HG_CHECK(st.stage != Stage::unscaled, "GradScaler.unscale_: already called on this ", opt.name(),
           " optimizer since the last update(); call it once per optimizer per step");
  HG_CHECK(st.stage != Stage::stepped, "GradScaler.unscale_: called after step(); unscale_ must come before step()");
  std::vector<Tensor> grads;
  std::vector<std::string> names;
  std::vector<int64_t> numels;
  for (auto& [name, p] : opt.named_parameters()) {
    st.params.insert(p.impl());
    if (!p.grad().defined()) continue;
    HG_CHECK(p.grad().dtype() != f16, "GradScaler.unscale_: parameter '", name,
             "' has f16 gradients; unscaling them in f16 would overflow or flush them. Keep f32 master weights "
             "(amp-master, amp::MasterWeights) or f32 parameters (amp) so the optimizer sees f32 gradients");
    HG_CHECK(p.grad().device() == device_, "GradScaler.unscale_: parameter '", name, "' has its gradient on ",
             p.grad().device(), " but the scaler is on ", device_);
    if (!p.grad().is_contiguous()) p.set_grad(p.grad().contiguous());
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
  for (const Tensor& g : grads) g.bump_version();  // unscaled in place
  st.stage = Stage::unscaled;
}

StepResult GradScaler::step(optim::Optimizer& opt) {
  if (!opt_.enabled) {
    opt.step();
    return {};
  }
  PerOptimizer& st = state_of(opt);
  HG_CHECK(st.stage != Stage::stepped, "GradScaler.step: already called on this ", opt.name(),
           " optimizer since the last update()");
  if (st.stage == Stage::ready) unscale_(opt);
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
  update_scale_stub(device_, scale_, growth_tracker_, hysteresis_tracker_, found, p);
  per_opt_.clear();
  scaled_since_update_ = false;
}

void GradScaler::update(double new_scale) {
  if (!opt_.enabled) return;
  HG_CHECK(new_scale > 0 && std::isfinite(new_scale), "GradScaler.update: new scale must be finite and > 0, got ",
           new_scale);
  fill_(scale_, new_scale);
  per_opt_.clear();
  scaled_since_update_ = false;
}

double GradScaler::get_scale() const { return opt_.enabled ? scale_.item<double>() : 1.0; }

bool GradScaler::holds_scaled_grad(const Tensor& param) const {
  if (!scaled_since_update_) return false;
  for (auto& [o, st] : per_opt_)
    if (st.stage != Stage::ready && st.params.count(param.impl())) return false;
  return true;
}

StateDict GradScaler::state_dict() const {
  if (!opt_.enabled) return {};
  auto scalar = [](double v) { return full({}, v, {f64}); };
  NoGrad ng;
  return {{"scale", scale_.to(Device::cpu()).clone()},
          {"_growth_tracker", growth_tracker_.to(Device::cpu()).clone()},
          {"_hysteresis_tracker", hysteresis_tracker_.to(Device::cpu()).clone()},
          {"growth_factor", scalar(opt_.growth_factor)},
          {"backoff_factor", scalar(opt_.backoff_factor)},
          {"growth_interval", scalar(static_cast<double>(opt_.growth_interval))},
          {"hysteresis", scalar(static_cast<double>(opt_.hysteresis))},
          {"min_scale", scalar(opt_.min_scale)},
          {"max_scale", scalar(opt_.max_scale)}};
}

void GradScaler::load_state_dict(const StateDict& sd) {
  HG_CHECK(opt_.enabled, "GradScaler.load_state_dict: this scaler is disabled");
  for (const char* k : {"scale", "_growth_tracker", "growth_factor", "backoff_factor", "growth_interval"})
    HG_CHECK(sd.count(k) && sd.at(k).numel() == 1, "GradScaler.load_state_dict: missing or malformed entry '", k, "'");
  NoGrad ng;
  copy_(scale_, sd.at("scale"));
  copy_(growth_tracker_, sd.at("_growth_tracker"));
  opt_.growth_factor = sd.at("growth_factor").item<double>();
  opt_.backoff_factor = sd.at("backoff_factor").item<double>();
  opt_.growth_interval = static_cast<int64_t>(sd.at("growth_interval").item<double>());
  if (sd.count("hysteresis")) opt_.hysteresis = static_cast<int64_t>(sd.at("hysteresis").item<double>());
  if (sd.count("_hysteresis_tracker")) copy_(hysteresis_tracker_, sd.at("_hysteresis_tracker"));
  if (sd.count("min_scale")) opt_.min_scale = sd.at("min_scale").item<double>();
  if (sd.count("max_scale")) opt_.max_scale = sd.at("max_scale").item<double>();
}

}  // namespace hg::amp
