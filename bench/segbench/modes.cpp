// The ablation ladder is built from the base recipes by switching one thing off, so
// each ablation differs from its base in exactly what its name says.
#include "bench/segbench/modes.h"

#include <algorithm>

#include "framework/error.h"

namespace hg::segbench {
namespace {

Mode ablation(const std::string& name, const std::string& base, const std::string& description) {
  Mode m;
  m.name = name;
  m.recipe = amp::recipe(base);
  m.recipe.name = name;
  m.ablation = true;
  m.description = description;
  return m;
}

}  // namespace

std::vector<std::string> default_mode_names() { return amp::mode_names(); }

std::vector<std::string> ablation_mode_names() { return {"amp-noscale", "fp16-f32state", "fp32-sgd", "amp-sgd", "fp16-sgd"}; }

std::string valid_modes_text() {
  std::string s;
  for (const auto& n : default_mode_names()) s += (s.empty() ? "" : ", ") + n;
  s += " (ablations: ";
  const auto ab = ablation_mode_names();
  for (size_t i = 0; i < ab.size(); ++i) s += (i ? ", " : "") + ab[i];
  return s + ")";
}

Mode mode(const std::string& name) {
  const auto defaults = default_mode_names();
  if (std::find(defaults.begin(), defaults.end(), name) != defaults.end()) {
    Mode m;
    m.name = name;
    m.recipe = amp::recipe(name);
    m.description = m.recipe.description;
    return m;
  }
  if (name == "amp-noscale") {
    Mode m = ablation(name, "amp", "amp without its loss scaler: autocast f16, f32 parameters, gradients unscaled");
    m.recipe.loss_scaling = false;
    return m;
  }
  if (name == "fp16-f32state") {
    Mode m = ablation(name, "fp16", "naive fp16 model and gradients, but Adam's m and v kept in f32");
    m.recipe.optimizer_state_in_param_dtype = false;
    return m;
  }
  if (name == "fp32-sgd" || name == "amp-sgd" || name == "fp16-sgd") {
    const std::string base = name.substr(0, name.size() - 4);
    Mode m = ablation(name, base, amp::recipe(base).description + "; SGD with momentum instead of Adam");
    m.optimizer = OptimizerKind::sgd;
    return m;
  }
  throw Error("unknown mode '" + name + "'; valid: " + valid_modes_text());
}

std::string Mode::params_dtype() const {
  const std::string p = dtype_name(recipe.policy.params);
  return recipe.master_weights ? p + " (f32 master)" : p;
}

std::string Mode::activations_dtype() const {
  return dtype_name(recipe.autocast ? *recipe.autocast : recipe.policy.params);
}

// Under autocast the weights are cast to the compute dtype, so backward computes their
// gradients there; the Cast node widens them into the f32 parameter's .grad.
std::string Mode::grads_dtype() const {
  const std::string stored = dtype_name(recipe.policy.params);
  if (recipe.autocast && *recipe.autocast != recipe.policy.params)
    return std::string(dtype_name(*recipe.autocast)) + " -> " + stored;
  return recipe.master_weights ? stored + " -> f32" : stored;
}

std::string Mode::optimizer_state_dtype() const {
  const std::string state = recipe.optimizer_state_in_param_dtype ? dtype_name(recipe.policy.params) : "f32";
  return (optimizer == OptimizerKind::sgd ? "momentum " : "m, v ") + state;
}

}  // namespace hg::segbench
