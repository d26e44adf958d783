// The automatic FP32 fallback on a constructed model with one overflow-prone layer:
// without it the scaler skips every step and the loss stalls; with it the layer (and
// what its f32 output then overflows) switch to f32 and the run converges.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>

#include "halfgrad.h"
#include "tests/amp/debug_models.h"

using namespace hg;

namespace {

struct Outcome {
  double first_finite_loss = NAN, last_loss = 0;
  int64_t skipped = 0;
  std::vector<double> scales;
};

// Regression of sum(x) under autocast f16 with dynamic loss scaling (or in f32).
Outcome train(test::OverflowNet& model, amp::Fp32Fallback* fallback, int steps, bool f16_autocast = true) {
  Generator g(4);
  Tensor x = randn({32, 4}, {f32}, &g);
  Tensor target = sum(x, {1}, true);
  optim::Adam opt(model.named_parameters(), optim::AdamOptions{.lr = 3e-3});
  amp::GradScaler scaler;
  Outcome out;
  for (int step = 0; step < steps; ++step) {
    if (fallback) fallback->begin_step(step);
    Tensor loss;
    {
      std::optional<amp::Autocast> ac;
      if (f16_autocast) ac.emplace(f16);
      loss = mse_loss(model(x).to(f32), target);
    }
    const double l = loss.item<double>();
    if (std::isnan(out.first_finite_loss) && std::isfinite(l)) out.first_finite_loss = l;
    out.last_loss = l;
    scaler.scale(loss).backward();
    amp::StepResult res = scaler.step(opt);
    out.skipped += res.skipped();
    out.scales.push_back(res.scale_value());
    scaler.update();
    if (fallback) fallback->end_step(&res);
    opt.zero_grad();
  }
  return out;
}

}  // namespace

TEST_CASE("Fp32Fallback: without it the run stalls, with it the run recovers and converges", "[amp][fallback]") {
  manual_seed(8);
  test::OverflowNet stalled_model(1e4);
  WarningCapture warnings;
  Outcome stalled = train(stalled_model, nullptr, 60);
  CHECK(stalled.skipped == 60);              // every forward overflows: no update is ever applied
  CHECK(stalled.scales.back() == 0x1p-24);   // while the scaler backs off down to its floor
  REQUIRE(warnings.messages().size() == 1);  // and says so once, at the 50th skipped step
  CHECK_THAT(warnings.messages()[0], Catch::Contains("the last 50 steps were all skipped"));
  CHECK_FALSE(std::isfinite(stalled.last_loss));

  manual_seed(8);
  test::OverflowNet model(1e4);
  amp::Fp32Fallback fallback(model, {.strikes = 3});
  Outcome ok = train(model, &fallback, 300);
  const auto& events = fallback.events();
  REQUIRE(!events.empty());
  CHECK(events[0].module == "big");
  CHECK(events[0].step == 2);  // the third strike
  CHECK_THAT(events[0].reason, Catch::Contains("forward output overflowed"));
  CHECK(model.big->precision() == f32);
  CHECK(events.size() == 1);  // big's f32 output is scaled down before shrink casts it to f16
  CHECK(ok.skipped < 20);
  CHECK(std::isfinite(ok.last_loss));

  // Converges as the same model does in f32.
  manual_seed(8);
  test::OverflowNet reference(1e4);
  Outcome f32run = train(reference, nullptr, 300, false);
  CHECK(f32run.skipped == 0);
  CHECK(ok.last_loss < 0.2 * ok.first_finite_loss);
  CHECK(ok.last_loss < 1.5 * f32run.last_loss);
}

TEST_CASE("Fp32Fallback: the switches survive a checkpoint; bad input is refused", "[amp][fallback]") {
  manual_seed(8);
  test::OverflowNet model(1e4);
  amp::Fp32Fallback fallback(model, {.strikes = 2});
  train(model, &fallback, 12);
  REQUIRE(!fallback.events().empty());
  Checkpoint ck;
  fallback.save(ck);

  test::OverflowNet fresh(1e4);
  amp::Fp32Fallback restored(fresh);
  restored.load(ck);
  CHECK(restored.fp32_modules() == fallback.fp32_modules());
  for (const std::string& path : fallback.fp32_modules())
    for (auto& [p, m] : fresh.named_modules())
      if (p == path) CHECK(m->precision() == f32);
  CHECK(restored.events()[0].step == fallback.events()[0].step);
  CHECK(restored.events()[0].reason == fallback.events()[0].reason);

  Checkpoint corrupt;
  corrupt.metadata["amp.fp32_fallback"] = "2\tnot_a_module\twhy\n";
  CHECK_THROWS_WITH(restored.load(corrupt), Catch::Contains("no such module"));
  corrupt.metadata["amp.fp32_fallback"] = "garbage";
  CHECK_THROWS_WITH(restored.load(corrupt), Catch::Contains("malformed"));
  CHECK_THROWS_WITH(amp::Fp32Fallback(model, {.strikes = 0}), Catch::Contains("strikes must be >= 1"));
  CHECK(amp::Policy::parse("params=f32,compute=f16,fallback=3").fallback_strikes == 3);
  CHECK_THROWS_WITH(amp::Policy::parse("fallback=-1"), Catch::Contains("fallback=-1 is invalid"));
}
