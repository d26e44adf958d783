// GradScaler: PyTorch's state machine against an independent reference, skipped steps,
// attribution, the clipping guard, f16 refusal and the state dict.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "halfgrad.h"

using namespace hg;

namespace {
std::vector<std::pair<std::string, Tensor>> named(const std::string& n, const Tensor& t) { return {{n, t}}; }

// Gives p the gradient g times the scale, the way a training step does: through
// scaler.scale(loss).backward() on loss = sum(p * g).
void scaled_backward(amp::GradScaler& s, const Tensor& p, const Tensor& g) {
  p.set_grad(Tensor());
  s.scale(sum(p * g)).backward();
}
}  // namespace

namespace {

// The rule written out from PyTorch's documentation, in f32 like the scale tensor,
// with the hysteresis/min/max extensions as amp/grad_scaler.h documents them.
struct RefScaler {
  float scale;
  int64_t tracker = 0, hyst;
  amp::GradScalerOptions o;
  explicit RefScaler(amp::GradScalerOptions opt) : scale(static_cast<float>(opt.init_scale)), hyst(opt.hysteresis), o(opt) {}
  void update(bool found_inf) {
    if (found_inf) {
      tracker = 0;
      if (--hyst <= 0) scale = std::max(static_cast<float>(scale * o.backoff_factor), static_cast<float>(o.min_scale));
      return;
    }
    if (++tracker == o.growth_interval) {
      float g = static_cast<float>(scale * o.growth_factor);
      if (std::isfinite(g)) scale = std::min(g, static_cast<float>(o.max_scale));
      tracker = 0;
      hyst = o.hysteresis;
    }
  }
};

// Drives a scaler through a sequence of steps whose gradients are finite or not.
void run_sequence(amp::GradScalerOptions o, const std::vector<int>& infs) {
  Tensor p = tensor({1.0, 2.0, 3.0}).set_requires_grad().set_name("p");
  optim::SGD opt({p}, optim::SGDOptions{.lr = 0.1});
  amp::GradScaler scaler(o);
  RefScaler ref(o);
  for (size_t i = 0; i < infs.size(); ++i) {
    scaled_backward(scaler, p, infs[i] ? tensor({1.0, INFINITY, 1.0}) : tensor({1.0, 1.0, 1.0}));
    amp::StepResult r = scaler.step(opt);
    CHECK(r.skipped() == (infs[i] != 0));
    scaler.update();
    ref.update(infs[i] != 0);
    INFO("step " << i);
    CHECK(scaler.get_scale() == static_cast<double>(ref.scale));
    CHECK(scaler.growth_tracker().item<int64_t>() == ref.tracker);
  }
}

}  // namespace

TEST_CASE("the scale follows PyTorch's rule: back off on overflow, grow after an interval", "[grad_scaler]") {
  amp::GradScalerOptions o;
  o.growth_interval = 3;
  run_sequence(o, {0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0});
  amp::GradScalerOptions d;
  CHECK(d.init_scale == 65536.0);
  CHECK(d.growth_factor == 2.0);
  CHECK(d.backoff_factor == 0.5);
  CHECK(d.growth_interval == 2000);
}

TEST_CASE("the scale stops growing below f32 overflow", "[grad_scaler]") {
  amp::GradScalerOptions o;
  o.init_scale = std::ldexp(1.0, 126);
  o.growth_interval = 1;
  run_sequence(o, {0, 0, 0});
  amp::GradScaler s(o);
  Tensor p = tensor({1.0}).set_requires_grad();
  optim::SGD opt({p}, optim::SGDOptions{.lr = 0.1});
  for (int i = 0; i < 3; ++i) {
    scaled_backward(s, p, tensor({1.0}));
    s.step(opt);
    s.update();
  }
  CHECK(s.get_scale() == std::ldexp(1.0, 127));
  CHECK(s.growth_tracker().item<int64_t>() == 0);
}

TEST_CASE("hysteresis, min_scale and max_scale", "[grad_scaler]") {
  amp::GradScalerOptions h;
  h.hysteresis = 2;
  h.growth_interval = 2;
  run_sequence(h, {1, 1, 1, 0, 0, 1, 0, 1, 1});
  amp::GradScalerOptions lo;
  lo.min_scale = 8192;
  run_sequence(lo, {1, 1, 1, 1, 1});
  amp::GradScalerOptions hi;
  hi.growth_interval = 1;
  hi.max_scale = 131072;
  run_sequence(hi, {0, 0, 0});
  amp::GradScalerOptions bad;
  bad.backoff_factor = 1.5;
  CHECK_THROWS_WITH(amp::GradScaler(bad), Catch::Contains("backoff_factor must be in (0, 1)"));
}

TEST_CASE("an overflowing step is skipped, names the parameters, and halves the scale", "[grad_scaler]") {
  nn::Linear fc(3, 2);
  fc.named_parameters();  // names the parameters by path
  optim::SGD opt(fc.named_parameters(), optim::SGDOptions{.lr = 0.5});
  amp::GradScaler scaler;
  std::vector<double> w0 = fc.weight.to_vector<double>();
  Tensor x = tensor({1e30, 1.0, 1.0}).reshape({1, 3});  // overflows f16 in the forward pass
  Tensor loss;
  {
    amp::Autocast ac(f16);
    loss = sum(fc(x));
  }
  scaler.scale(loss).backward();
  amp::StepResult r = scaler.step(opt);
  scaler.update();
  CHECK(r.skipped());
  CHECK(r.scale_value() == 65536.0);
  CHECK(scaler.get_scale() == 32768.0);
  CHECK(fc.weight.to_vector<double>() == w0);
  auto bad = r.nonfinite();
  REQUIRE_FALSE(bad.empty());
  CHECK(bad[0].first == "weight");
  CHECK(bad[0].second > 0);
}

TEST_CASE("a good step unscales exactly and updates", "[grad_scaler]") {
  Tensor w = tensor({0.5, -0.25}).set_requires_grad().set_name("w");
  optim::SGD opt(named("w", w), optim::SGDOptions{.lr = 1.0});
  amp::GradScaler scaler;
  Tensor loss = sum(w * tensor({3.0, 5.0}));
  scaler.scale(loss).backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{3.0 * 65536, 5.0 * 65536});
  scaler.unscale_(opt);
  CHECK(w.grad().to_vector<double>() == std::vector<double>{3.0, 5.0});
  CHECK_THROWS_WITH(scaler.unscale_(opt), Catch::Contains("already called"));
  CHECK_FALSE(scaler.step(opt).skipped());
  CHECK_THROWS_WITH(scaler.step(opt), Catch::Contains("already called"));
  scaler.update();
  CHECK(w.to_vector<double>() == std::vector<double>{0.5 - 3.0, -0.25 - 5.0});
}

TEST_CASE("clipping gradients that still carry the scale is refused", "[grad_scaler][clip]") {
  Tensor w = tensor({0.5, -0.25}).set_requires_grad().set_name("w");
  optim::SGD opt(named("w", w), optim::SGDOptions{.lr = 0.1});
  amp::GradScaler scaler;
  scaler.scale(sum(w * 3.0)).backward();
  CHECK_THROWS_WITH(optim::clip_grad_norm_({w}, 1.0), Catch::Contains("still multiplied by the loss scale") &&
                                                          Catch::Contains("unscale_(optimizer) first"));
  scaler.unscale_(opt);
  CHECK(optim::clip_grad_norm_({w}, 1.0) == Approx(std::sqrt(18.0)));
  scaler.step(opt);
  scaler.update();
}

TEST_CASE("f16 gradients are refused by unscale_", "[grad_scaler]") {
  Tensor w = tensor({0.5}, {f16}).set_requires_grad().set_name("w16");
  optim::SGD opt(named("w16", w), optim::SGDOptions{.lr = 0.1});
  amp::GradScaler scaler;
  scaler.scale(sum(w * 2.0)).backward();
  CHECK_THROWS_WITH(scaler.unscale_(opt), Catch::Contains("'w16' has f16 gradients") && Catch::Contains("master"));
}

TEST_CASE("scaler state_dict round trip continues the same trajectory", "[grad_scaler][state]") {
  amp::GradScalerOptions o;
  o.growth_interval = 2;
  std::vector<int> seq = {0, 1, 0, 0, 0, 1, 0};
  amp::GradScaler a(o), b(o);
  Tensor p = tensor({1.0}).set_requires_grad();
  optim::SGD opt({p}, optim::SGDOptions{.lr = 0.0});
  auto drive = [&](amp::GradScaler& s, int inf) {
    scaled_backward(s, p, tensor({inf ? NAN : 1.0}));
    s.step(opt);
    s.update();
  };
  for (int i = 0; i < 3; ++i) drive(a, seq[static_cast<size_t>(i)]);
  b.load_state_dict(a.state_dict());
  CHECK(b.get_scale() == a.get_scale());
  for (size_t i = 3; i < seq.size(); ++i) {
    drive(a, seq[i]);
    drive(b, seq[i]);
    CHECK(a.get_scale() == b.get_scale());
    CHECK(a.growth_tracker().item<int64_t>() == b.growth_tracker().item<int64_t>());
  }
  CHECK_THROWS_WITH(b.load_state_dict({}), Catch::Contains("source state dict is empty"));
}

TEST_CASE("gradient accumulation: several scaled backwards, one unscale and step", "[grad_scaler][accumulation]") {
  Tensor w = tensor({0.5, -0.25}).set_requires_grad().set_name("w");
  optim::SGD opt(named("w", w), optim::SGDOptions{.lr = 1.0});
  amp::GradScaler scaler;
  // Two micro-batches whose gradients are (1, 2) and (3, 4): the step sees their sum.
  scaler.scale(sum(w * tensor({1.0, 2.0}))).backward();
  scaler.scale(sum(w * tensor({3.0, 4.0}))).backward();
  CHECK_THROWS_WITH(optim::clip_grad_norm_({w}, 100.0), Catch::Contains("still multiplied"));
  CHECK_FALSE(scaler.step(opt).skipped());
  scaler.update();
  CHECK(w.to_vector<double>() == std::vector<double>{0.5 - 4.0, -0.25 - 6.0});
  CHECK(scaler.get_scale() == 65536.0);
}
