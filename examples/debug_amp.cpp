// The recipes of docs/debugging-amp.md, one function each, on a small MLP whose middle
// layer can be made to overflow f16. Usage: debug_amp [recipe]   (no argument: all)
// Recipes, in the doc's order: find-layer, anomaly, compare, scale, clip, batch, batchnorm,
//          fp32-layer, fallback, grad-norms, lr-init
#include <cmath>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>
#include <string>

#include "halfgrad.h"

using namespace hg;

namespace {

// in -> hidden -> hidden -> 1. The middle layer sees its input multiplied by `gain`
// and its output divided by it: the f32 function stays well behaved while the middle
// activations grow; gain 1e4 puts them near 9e4, past the f16 maximum 65504.
struct Net : nn::Module {
  HG_CHILD(nn::Linear, fc1, 4, 16);
  HG_CHILD(nn::Linear, mid, 16, 16);
  HG_CHILD(nn::Linear, head, 16, 1);
  const double gain;
  explicit Net(double g = 1.0) : gain(g) {
    NoGrad ng;
    copy_(mid->weight, mul(mid->weight, 10.0));
  }
  Tensor forward_impl(const Tensor& x) override {
    Tensor z = relu((*mid)(mul(relu((*fc1)(x)), gain)));
    return (*head)(mul(z, 1.0 / gain));
  }
  std::string type_name() const override { return "Net"; }
};

struct Data {
  Tensor x, y;
};
Data data(int64_t n = 64) {
  Generator g(1);
  Tensor x = randn({n, 4}, {}, &g);
  return {x, sum(x, {1}, true)};
}

// One amp (O1) training step; returns the scaler's result.
amp::StepResult amp_step(nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler, const Data& d) {
  Tensor loss;
  {
    amp::Autocast ac(f16);
    loss = mse_loss(model(d.x).to(f32), d.y);
  }
  scaler.scale(loss).backward();
  amp::StepResult res = scaler.step(opt);
  scaler.update();
  opt.zero_grad();
  return res;
}

void find_layer() {
  manual_seed(1);
  Net model(1e4);
  amp::NumericsMonitor mon(model, {.every = 1});
  mon.begin_step(0);
  {
    amp::Autocast ac(f16);
    model(data().x);
  }
  mon.end_step();
  std::printf("first overflow: %s\n", mon.first_overflow()->label().c_str());
  std::printf("worst tensors for f16:\n%s", mon.worst_table(4).c_str());
}

void anomaly() {
  manual_seed(1);
  Net model(1e4);
  try {
    amp::DetectAnomaly guard;
    amp::Autocast ac(f16);
    model(data().x);
  } catch (const NumericsError& e) {
    std::printf("%s\n", e.what());
  }
}

void scale() {
  // A forward overflow no scale can fix: the scale collapses, every step is skipped.
  manual_seed(1);
  Net model(1e4);
  optim::Adam opt(model.named_parameters(), {.lr = 1e-3});
  amp::GradScaler scaler({.init_scale = 1024.0});  // a manual, lower initial scale
  const Data d = data();
  for (int s = 0; s < 4; ++s) {
    amp::StepResult r = amp_step(model, opt, scaler, d);
    std::printf("step %d: scale %g -> %g%s\n", s, r.scale_value(), scaler.get_scale(), r.skipped() ? " (skipped)" : "");
  }
  scaler.update(256.0);  // a manual reduction
  std::printf("after update(256): scale %g\n", scaler.get_scale());
}

void clip() {
  manual_seed(1);
  Net model;
  optim::Adam opt(model.named_parameters(), {.lr = 1e-3});
  amp::GradScaler scaler({.init_scale = 1024.0});
  const Data d = data();
  Tensor loss;
  {
    amp::Autocast ac(f16);
    loss = mse_loss(model(d.x).to(f32), d.y);
  }
  scaler.scale(loss).backward();
  try {
    optim::clip_grad_norm_(model.parameters(), 1.0);  // the trap: gradients still scaled
  } catch (const Error& e) {
    std::printf("refused: %s\n", e.what());
  }
  scaler.unscale_(opt);
  const double norm = optim::clip_grad_norm_(model.parameters(), 1.0);
  std::printf("after unscale_: total norm %.4g, clipped to 1\n", norm);
  scaler.step(opt);
  scaler.update();
}

void batch() {
  // With a summed loss each activation gradient belongs to one sample and does not grow
  // with the batch; a weight gradient sums over the batch and does. Both as backward
  // produced them, at the loss scale 1024.
  manual_seed(1);
  Net model;
  for (int64_t n : {8, 64, 512}) {
    const Data d = data(n);
    amp::NumericsMonitor mon(model, {.every = 1, .weights = false});
    mon.begin_step(0);
    {
      amp::Autocast ac(f16);
      Tensor out = model(d.x);
      mul(sum(square(out.to(f32) - d.y)), 1024.0).backward();
    }
    mon.end_step();
    double act_rms = 0, wgt = 0;
    int64_t wgt_bad = 0;
    for (const auto& r : mon.records()) {
      if (r.kind == amp::TensorKind::activation_grad && r.module == "head")
        act_rms = r.stats.l2 / std::sqrt(static_cast<double>(r.stats.numel));
      if (r.kind == amp::TensorKind::weight_grad) {
        wgt = std::max(wgt, r.stats.amax);
        wgt_bad += r.stats.nonfinite();
      }
    }
    std::printf("batch %3lld: head activation gradient rms %.3g; largest finite weight gradient %.3g, %lld inf/NaN\n",
                static_cast<long long>(n), act_rms, wgt, static_cast<long long>(wgt_bad));
    model.zero_grad();
  }
}

void batchnorm() {
  // Ten conv layers with a gain above 1: activations grow geometrically and leave the
  // f16 range; BatchNorm after each conv keeps them near unit scale.
  for (bool bn : {false, true}) {
    manual_seed(2);
    nn::Sequential net;
    for (int i = 0; i < 10; ++i) {
      auto conv = std::make_shared<nn::Conv2d>(8, 8, 3, Conv2dOptions{.padding = {1, 1}});
      NoGrad ng;
      copy_(conv->weight, mul(conv->weight, 8.0));
      net.push_back(conv);
      if (bn) net.push_back(std::make_shared<nn::BatchNorm2d>(8));
    }
    amp::NumericsMonitor mon(net, {.every = 1});
    mon.begin_step(0);
    {
      amp::Autocast ac(f16);
      net(randn({2, 16, 16, 8}));
    }
    mon.end_step();
    auto first = mon.first_overflow();
    double amax = 0;
    for (const auto& r : mon.records())
      if (r.kind == amp::TensorKind::activation && r.module.empty()) amax = r.stats.amax;
    std::printf("%s BatchNorm: output amax %.3g, %s\n", bn ? "with" : "without", amax,
                first ? ("overflow starts at " + first->label()).c_str() : "no overflow");
  }
}

void fp32_layer() {
  manual_seed(1);
  Net model(1e4);
  model.mid->set_precision(f32);  // this module's ops run in f32 under autocast
  optim::Adam opt(model.named_parameters(), {.lr = 3e-3});
  amp::GradScaler scaler;
  const Data d = data();
  int skipped = 0;
  for (int s = 0; s < 50; ++s) skipped += amp_step(model, opt, scaler, d).skipped();
  std::printf("mid in f32: %d of 50 steps skipped while the scaler found its level (now %g)\n", skipped,
              scaler.get_scale());
}

void fallback() {
  manual_seed(1);
  Net model(1e4);
  optim::Adam opt(model.named_parameters(), {.lr = 3e-3});
  amp::GradScaler scaler;
  amp::Fp32Fallback fb(model, {.strikes = 3});
  const Data d = data();
  double first = NAN, last = NAN;
  for (int s = 0; s < 200; ++s) {
    fb.begin_step(s);
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(model(d.x).to(f32), d.y);
    }
    last = loss.item<double>();
    if (std::isnan(first) && std::isfinite(last)) first = last;
    scaler.scale(loss).backward();
    amp::StepResult r = scaler.step(opt);
    scaler.update();
    fb.end_step(&r);
    opt.zero_grad();
  }
  for (const auto& e : fb.events()) std::printf("step %lld: %s -> f32: %s\n", static_cast<long long>(e.step), e.module.c_str(), e.reason.c_str());
  std::printf("loss %.4g -> %.4g\n", first, last);
}

void compare() {
  manual_seed(1);
  Net model(1e4);
  const Data d = data();
  amp::Comparison c = amp::compare(model, d.x, [&](const Tensor& y) { return mse_loss(y, d.y); }, amp::recipe("amp").policy);
  std::printf("%s", c.table().c_str());
}

void grad_norms() {
  manual_seed(1);
  Net model(10.0);
  optim::Adam opt(model.named_parameters(), {.lr = 1e-3});
  amp::GradScaler scaler({.init_scale = 1024.0});
  amp::NumericsMonitor mon(model, {.every = 1, .activations = false, .activation_grads = false, .weights = false});
  const Data d = data();
  mon.begin_step(0);
  Tensor loss;
  {
    amp::Autocast ac(f16);
    loss = mse_loss(model(d.x).to(f32), d.y);
  }
  scaler.scale(loss).backward();
  scaler.unscale_(opt);
  mon.end_step();
  for (const auto& r : mon.records())
    std::printf("%-12s grad norm %.3g  amax %.3g%s\n", (r.module + "." + r.param).c_str(), r.stats.l2, r.stats.amax,
                r.stats.nonfinite() ? (" (" + std::to_string(r.stats.nonfinite()) + " non-finite)").c_str() : "");
}

void lr_init() {
  // An lr far too high drives the weights (and then the activations) out of the f16
  // range: the scaler starts skipping, and each skip is named in one line.
  for (double lr : {0.01, 2.0}) {
    manual_seed(1);
    Net model;
    optim::SGD opt(model.named_parameters(), {.lr = lr});
    amp::GradScaler scaler({.init_scale = 256.0, .growth_interval = 1000});
    const Data d = data();
    std::string what = "no step skipped in 30";
    for (int s = 0; s < 30; ++s) {
      amp::StepResult r = amp_step(model, opt, scaler, d);
      if (r.skipped()) {
        what = "step " + std::to_string(s) + ": " + r.summary();
        break;
      }
    }
    std::printf("lr %g: %s\n", lr, what.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // In the order of docs/debugging-amp.md.
  const std::vector<std::pair<std::string, std::function<void()>>> recipes = {
      {"find-layer", find_layer}, {"anomaly", anomaly},   {"compare", compare},       {"scale", scale},
      {"clip", clip},             {"batch", batch},       {"batchnorm", batchnorm},   {"fp32-layer", fp32_layer},
      {"fallback", fallback},     {"grad-norms", grad_norms}, {"lr-init", lr_init}};
  auto known = [&](const std::string& n) {
    for (auto& r : recipes)
      if (r.first == n) return true;
    return false;
  };
  const std::string only = argc > 1 ? argv[1] : "";
  if (!only.empty() && !known(only)) {
    std::fprintf(stderr, "debug_amp: unknown recipe '%s'; valid:", only.c_str());
    for (auto& [name, f] : recipes) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  for (auto& [name, f] : recipes) {
    if (!only.empty() && name != only) continue;
    if (only.empty()) std::printf("== %s\n", name.c_str());
    f();
  }
  return 0;
}
