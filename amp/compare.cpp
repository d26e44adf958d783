// compare(): two passes with a module-output observer capturing every module's output,
// then per-module relative errors computed in f64 on the host.
#include "amp/compare.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "amp/autocast.h"
#include "amp/master_weights.h"
#include "framework/generator.h"
#include "ops/copy.h"
#include "ops/elementwise.h"

namespace hg::amp {

namespace {

struct Pass {
  std::vector<std::pair<nn::Module*, Tensor>> outputs;  // f64 copies, completion order
  std::vector<DType> dtypes;                            // the outputs' own dtypes
  std::map<std::string, Tensor> grads;                  // f64 copies by parameter name
  double loss = 0;
};

// ||a - ref|| and ||ref|| in f64; the difference is inf when a is not finite or the
// shapes differ.
struct Norms {
  double diff = 0, ref = 0;
};
Norms norms(const Tensor& a, const Tensor& ref) {
  std::vector<double> x = a.to_vector<double>(), r = ref.to_vector<double>();
  Norms n;
  for (double v : r) n.ref += v * v;
  n.ref = std::sqrt(n.ref);
  if (x.size() != r.size()) {
    n.diff = std::numeric_limits<double>::infinity();
    return n;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      n.diff = std::numeric_limits<double>::infinity();
      return n;
    }
    n.diff += (x[i] - r[i]) * (x[i] - r[i]);
  }
  n.diff = std::sqrt(n.diff);
  return n;
}

// diff / scale, where a zero difference is no error even at scale 0.
double ratio(double diff, double scale) {
  if (diff == 0) return 0;
  return scale == 0 ? std::numeric_limits<double>::infinity() : diff / scale;
}

double relative_error(const Tensor& a, const Tensor& ref) {
  const Norms n = norms(a, ref);
  return ratio(n.diff, n.ref);
}

Pass run_pass(nn::Module& model, const Tensor& input, const LossFn& loss_fn, const Policy& policy, double scale) {
  // Shared with the observer: a forward in another thread may still hold a copy of it.
  auto pass = std::make_shared<Pass>();
  nn::ObserverHandle handle = model.add_output_observer([pass](nn::Module& m, const Tensor& y) {
    if (!y.defined() || !is_floating(y.dtype())) return;
    NoGrad ng;
    pass->outputs.emplace_back(&m, y.detach().to(f64));
    pass->dtypes.push_back(y.dtype());
  });
  model.zero_grad();
  // Token ids and other integer inputs stay as they are; floating inputs follow the parameters.
  Tensor x = policy.params == f32 || !is_floating(input.dtype()) ? input : input.to(policy.params);
  Tensor loss;
  {
    std::optional<Autocast> ac;
    if (policy.compute != policy.params) ac.emplace(policy.compute);
    Tensor out = model(x);
    if (out.dtype() != policy.output) out = out.to(policy.output);
    loss = loss_fn(out);
  }
  handle.reset();
  HG_CHECK(loss.numel() == 1, "compare: the loss function must return one value, got shape ", shape_str(loss.shape()));
  pass->loss = loss.item<double>();
  (scale != 1.0 ? mul(loss.to(f32), scale) : loss).backward();
  NoGrad ng;
  for (auto& [name, p] : model.named_parameters())
    if (p.grad().defined()) pass->grads[name] = div(p.grad().to(f64), scale);
  return std::move(*pass);
}

// bf16 keeps 8 significant bits to f16's 11: its unit roundoff 2^-8 is 8 times f16's
// 2^-11, and so is the error a healthy bf16 layer shows. Wider outputs carry the error
// of the reduced-precision layers before them and are held to the f16 threshold.
// A gradient that is zero in exact arithmetic is rounding noise in both passes: k_proj's
// bias in attention (softmax ignores a shift of the logits) is ~1e-10 in f32, and its noise
// against the f16 pass's is a relative error of ~1e3. That noise is about 0.1 u ||G||
// (u the unit roundoff, G the module's gradient; measured on MultiheadAttention and GPT);
// against 0.1 ||G|| it reads ~u, 20x under the thresholds (~20 u). 1e-3 was tried and
// still flagged k_proj (4e-2 in f16). A gradient the run loses entirely still counts
// once it is over threshold x 0.1 of its module's.
constexpr double kGradFloor = 0.1;

double threshold_for(DType dtype, double f16_threshold) { return dtype == bf16 ? 8.0 * f16_threshold : f16_threshold; }

std::string fmt(double v) {
  if (v < 0) return "-";
  if (std::isinf(v)) return "non-finite";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

}  // namespace

Comparison compare(nn::Module& model, const Tensor& input, const LossFn& loss_fn, const Policy& policy,
                   CompareOptions options) {
  HG_CHECK(options.threshold > 0, "compare: threshold must be > 0, got ", options.threshold);
  HG_CHECK(options.grad_threshold > 0, "compare: grad_threshold must be > 0, got ", options.grad_threshold);
  HG_CHECK(options.loss_scale > 0 && std::isfinite(options.loss_scale), "compare: loss_scale must be finite and > 0, got ",
           options.loss_scale);
  for (auto& [name, p] : model.named_parameters())
    HG_CHECK(p.dtype() == f32, "compare: the model's parameters must be f32 (the reference pass), but '", name, "' is ",
             dtype_name(p.dtype()));
  // Everything the passes change, to put back afterwards: values and dtypes of the
  // parameters and buffers, gradients, the default generator's state (dropout draws),
  // and each module's mode and precision (which the passes use as the user set them).
  const StateDict originals = model.state_dict();  // aliases: the tensors' own storage, shape and dtype
  StateDict saved;
  std::map<std::string, Tensor> saved_grads;
  {
    NoGrad ng;
    for (auto& [k, v] : originals) saved[k] = v.clone();
    for (auto& [name, p] : model.named_parameters())
      if (p.grad().defined()) saved_grads[name] = p.grad().clone();
  }
  Generator& gen = default_generator();
  const uint64_t gen_seed = gen.seed(), gen_draws = gen.draws();
  std::vector<std::tuple<nn::Module*, bool, std::optional<DType>>> modes;
  for (auto& [path, m] : model.named_modules()) modes.emplace_back(m, m->is_training(), m->precision());
  // Back to the saved state, in the original storage (handles, views and tied weights
  // stay valid); both passes start from it, so they draw the same dropout masks and see
  // the same running statistics.
  auto reset = [&] {
    NoGrad ng;
    for (auto& [name, t] : model.named_parameters()) t.set_data(originals.at(name));
    for (auto& [name, t] : model.named_buffers()) t.set_data(originals.at(name));
    for (auto& [name, t] : originals) copy_(t, saved.at(name));
    for (auto& [m, training, precision] : modes) {
      m->train(training);
      m->set_precision(precision);
    }
    gen.set_state(gen_seed, gen_draws);
  };
  auto restore = [&] {
    reset();
    for (auto& [name, p] : model.named_parameters())
      if (saved_grads.count(name)) p.set_grad(saved_grads[name]);
  };

  Comparison c;
  c.policy = policy.str();
  c.threshold = options.threshold;
  c.grad_threshold = options.grad_threshold;
  Pass ref, low;
  auto grads_finite = [](const Pass& p) {
    for (auto& [name, g] : p.grads)
      for (double v : g.to_vector<double>())
        if (!std::isfinite(v)) return false;
    return true;
  };
  try {
    reset();
    ref = run_pass(model, input, loss_fn, Policy{}, 1.0);
    // As a dynamic scaler would: halve the scale while the gradients overflow (a
    // non-finite loss cannot be fixed by any scale).
    const bool uses_f16 = policy.params == f16 || policy.compute == f16;
    double scale = uses_f16 ? options.loss_scale : 1.0;
    for (;;) {
      reset();
      if (policy.params != f32) cast_model(model, policy.params, policy.keep_batchnorm_f32);
      low = run_pass(model, input, loss_fn, policy, scale);
      if (!uses_f16 || scale <= 1.0 || !std::isfinite(low.loss) || grads_finite(low)) break;
      scale /= 2;
    }
    c.loss_scale = scale;
  } catch (...) {
    restore();
    throw;
  }
  restore();

  HG_CHECK(ref.outputs.size() == low.outputs.size(), "compare: the two passes ran different modules (", ref.outputs.size(),
           " vs ", low.outputs.size(), " outputs); the model's forward must not depend on the dtype");
  c.loss_f32 = ref.loss;
  c.loss_policy = low.loss;
  std::map<const nn::Module*, std::string> paths;
  for (auto& [path, m] : model.named_modules()) paths[m] = path;
  for (size_t i = 0; i < ref.outputs.size(); ++i) {
    nn::Module* m = ref.outputs[i].first;
    ModuleComparison mc;
    mc.module = paths[m];
    mc.type = m->type_name();
    mc.dtype = low.dtypes[i];
    mc.activation_error = relative_error(low.outputs[i].second, ref.outputs[i].second);
    // Each own parameter's gradient error, against the larger of its own f32 gradient's
    // norm and kGradFloor x the module's (all its own parameters together).
    std::vector<Norms> own;
    double module_sq = 0;
    for (auto& [name, p] : m->named_parameters()) {
      if (name.find('.') != std::string::npos) continue;  // a child's parameter: reported with the child
      const std::string full = mc.module.empty() ? name : mc.module + "." + name;
      if (!ref.grads.count(full)) continue;
      Norms n = norms(ref.grads[full], ref.grads[full]);
      if (low.grads.count(full)) n.diff = norms(low.grads[full], ref.grads[full]).diff;
      else n.diff = std::numeric_limits<double>::infinity();
      module_sq += n.ref * n.ref;
      own.push_back(n);
    }
    for (const Norms& n : own)
      mc.grad_error = std::max(mc.grad_error, ratio(n.diff, std::max(n.ref, kGradFloor * std::sqrt(module_sq))));
    mc.threshold = threshold_for(mc.dtype, options.threshold);
    mc.grad_threshold = options.grad_threshold;
    mc.exceeds = mc.activation_error > mc.threshold || mc.grad_error > mc.grad_threshold;
    c.modules.push_back(mc);
  }
  // Output errors flow forward, gradient errors backward: the origin is the first
  // module whose output diverges, else the last one whose weight gradients do.
  for (size_t i = 0; i < c.modules.size() && !c.first_exceeding; ++i)
    if (c.modules[i].activation_error > c.modules[i].threshold) c.first_exceeding = i;
  for (size_t i = c.modules.size(); i-- > 0 && !c.first_exceeding;)
    if (c.modules[i].grad_error > c.modules[i].grad_threshold) c.first_exceeding = i;
  return c;
}

std::string Comparison::table() const {
  std::ostringstream os;
  os << "f32 vs " << policy << ": loss " << loss_f32 << " vs " << loss_policy << " (gradients at loss scale "
     << loss_scale << ")\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-28s %-16s %-6s %14s %16s\n", "module", "type", "dtype", "output err",
                "weight-grad err");
  os << line;
  for (size_t i = 0; i < modules.size(); ++i) {
    const ModuleComparison& m = modules[i];
    std::snprintf(line, sizeof line, "%s %-28s %-16s %-6s %14s %16s\n", first_exceeding == i ? ">" : " ",
                  m.module.empty() ? "(model)" : m.module.c_str(), m.type.c_str(), dtype_name(m.dtype),
                  fmt(m.activation_error).c_str(), fmt(m.grad_error).c_str());
    os << line;
  }
  if (first_exceeding) {
    const ModuleComparison& m = modules[*first_exceeding];
    const bool output = m.activation_error > m.threshold;
    os << "first module over the threshold " << (output ? m.threshold : m.grad_threshold) << ": "
       << (m.module.empty() ? "(model)" : m.module)
       << (output ? " (its output; later modules inherit the error)" : " (its weight gradients; backward reaches it first)")
       << "\n";
  } else {
    os << "no module exceeds the relative error thresholds " << threshold << " (outputs) and " << grad_threshold
       << " (weight gradients)\n";
  }
  return os.str();
}

std::string Comparison::json() const {
  std::ostringstream os;
  os.precision(6);
  auto num = [](double v) { return std::isfinite(v) ? detail::concat(v) : std::string("null"); };
  os << "{\"policy\":\"" << policy << "\",\"threshold\":" << threshold << ",\"grad_threshold\":" << grad_threshold
     << ",\"loss_f32\":" << num(loss_f32)
     << ",\"loss_policy\":" << num(loss_policy) << ",\"loss_scale\":" << loss_scale << ",\"first_exceeding\":";
  if (first_exceeding) os << "\"" << modules[*first_exceeding].module << "\""; else os << "null";
  os << ",\"modules\":[";
  for (size_t i = 0; i < modules.size(); ++i) {
    const ModuleComparison& m = modules[i];
    os << (i ? "," : "") << "{\"module\":\"" << m.module << "\",\"type\":\"" << m.type
       << "\",\"output_error\":" << num(m.activation_error)
       << ",\"grad_error\":" << (m.grad_error < 0 ? std::string("null") : num(m.grad_error))
       << ",\"threshold\":" << m.threshold << ",\"grad_threshold\":" << m.grad_threshold
       << ",\"exceeds\":" << (m.exceeds ? "true" : "false") << "}";
  }
  os << "]}";
  return os.str();
}

}  // namespace hg::amp
