// Training modes on constructed problems: tiny gradients flush to zero in naive fp16
// (training stalls) and survive loss scaling in amp; O2 master weights keep updates
// that f16 weights would swallow.
#include <catch2/catch.hpp>

#include <cmath>

#include "halfgrad.h"

using namespace hg;

namespace {
std::vector<std::pair<std::string, Tensor>> named(const std::string& n, const Tensor& t) { return {{n, t}}; }
}  // namespace

namespace {

struct Run {
  std::vector<double> losses;
  double final_grad_abs_sum = 0;
};

// Regression y = x w_true with the loss multiplied by 1e-8, so every gradient is ~1e-8:
// below f16's smallest subnormal (2^-24 ~ 6e-8) they flush to zero without scaling.
Run train(const std::string& mode, int steps) {
  amp::Recipe rc = amp::recipe(mode);
  Generator g(3);
  Tensor x = randn({64, 8}, {f32}, &g);
  Tensor w_true = randn({8, 1}, {f32}, &g);
  Tensor y = matmul(x, w_true);
  manual_seed(5);
  nn::Linear fc(8, 1, false);
  fc.named_parameters();
  if (rc.policy.params != f32) amp::cast_model(fc, rc.policy.params, rc.policy.keep_batchnorm_f32);
  std::unique_ptr<amp::MasterWeights> mw;
  if (rc.master_weights) mw = std::make_unique<amp::MasterWeights>(fc.named_parameters());
  optim::Adam opt(mw ? mw->params() : fc.named_parameters(), optim::AdamOptions{.lr = 0.05});
  amp::GradScalerOptions so;
  so.enabled = rc.loss_scaling;
  amp::GradScaler scaler(so);
  Run run;
  for (int s = 0; s < steps; ++s) {
    Tensor loss;
    {
      std::optional<amp::Autocast> ac;
      if (rc.autocast) ac.emplace(*rc.autocast);
      Tensor xin = rc.policy.params == f16 ? x.to(f16) : x;
      loss = mean(square(fc(xin).to(f32) - y)) * 1e-8;
    }
    run.losses.push_back(loss.item<double>() * 1e8);
    scaler.scale(loss).backward();
    if (mw) mw->copy_grads_to_master();
    run.final_grad_abs_sum = 0;
    for (auto& [n, p] : opt.named_parameters())
      if (p.grad().defined()) run.final_grad_abs_sum += sum(abs(p.grad().to(f64))).item<double>();
    scaler.step(opt);
    scaler.update();
    if (mw) mw->copy_master_to_model();
    opt.zero_grad();
    fc.zero_grad();
  }
  return run;
}

}  // namespace

TEST_CASE("tiny gradients: fp16 stalls, amp follows fp32", "[amp_training]") {
  const int steps = 60;
  Run f32_run = train("fp32", steps), amp_run = train("amp", steps), fp16_run = train("fp16", steps);
  // fp32 learns.
  CHECK(f32_run.losses.back() < 0.1 * f32_run.losses.front());
  // Naive fp16: every gradient flushed to zero, the loss never moves.
  CHECK(fp16_run.final_grad_abs_sum == 0.0);
  CHECK(fp16_run.losses.back() == Approx(fp16_run.losses.front()).epsilon(1e-3));
  // amp: the scaled gradients survive f16 and the run tracks fp32.
  CHECK(amp_run.final_grad_abs_sum > 0.0);
  for (int s = 0; s < steps; s += 10) {
    INFO("step " << s);
    CHECK(amp_run.losses[static_cast<size_t>(s)] == Approx(f32_run.losses[static_cast<size_t>(s)]).epsilon(0.05).margin(1e-3));
  }
  // O2 with master weights learns as well.
  Run o2 = train("amp-master", steps);
  CHECK(o2.losses.back() < 0.1 * o2.losses.front());
}

TEST_CASE("f32 master weights keep updates that f16 weights swallow", "[amp_training][master]") {
  // A weight of 1.0 and an update of 1e-4: below half an f16 ulp at 1.0 (2^-11 ~ 4.9e-4).
  Tensor w16 = tensor({1.0}, {f16}).set_requires_grad().set_name("w");
  optim::SGD plain(named("w", w16), optim::SGDOptions{.lr = 1e-4});
  for (int i = 0; i < 100; ++i) {
    w16.set_grad(tensor({1.0}, {f16}));
    plain.step();
  }
  CHECK(w16.item<double>() == 1.0);  // every update rounded away

  Tensor m16 = tensor({1.0}, {f16}).set_requires_grad().set_name("w");
  amp::MasterWeights mw(named("w", m16));
  optim::SGD opt(mw.params(), optim::SGDOptions{.lr = 1e-4});
  for (int i = 0; i < 100; ++i) {
    m16.set_grad(tensor({1.0}, {f16}));
    mw.copy_grads_to_master();
    opt.step();
    mw.copy_master_to_model();
  }
  CHECK(mw.params()[0].second.item<double>() == Approx(0.99).epsilon(1e-5));
  CHECK(m16.item<double>() == Approx(0.99).epsilon(1e-3));  // the f16 copy follows, rounded once
}

TEST_CASE("cast_model keeps BatchNorm in f32", "[amp_training][cast_model]") {
  nn::Sequential net;
  net.push_back(std::make_shared<nn::Conv2d>(3, 4, 3));
  net.push_back(std::make_shared<nn::BatchNorm2d>(4));
  amp::cast_model(net, f16);
  for (auto& [name, p] : net.named_parameters()) {
    INFO(name);
    CHECK(p.dtype() == (name.rfind("1.", 0) == 0 ? f32 : f16));
  }
  for (auto& [name, b] : net.named_buffers())
    if (is_floating(b.dtype())) CHECK(b.dtype() == f32);
  amp::cast_model(net, f16, false);
  for (auto& [name, p] : net.named_parameters()) CHECK(p.dtype() == f16);
}
