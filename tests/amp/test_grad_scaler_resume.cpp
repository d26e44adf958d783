// GradScaler states that must survive: every state update() can produce reloads and the
// reloaded scaler continues identically (a property over random options and overflow
// sequences), the scale's floor, the watch on runs of skipped steps, and the states
// earlier versions wrote.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "halfgrad.h"
#include "tests/devices.h"

using namespace hg;

namespace {

// A parameter whose scaled gradient is finite or not on demand, and its optimizer.
struct Rig {
  Tensor p;
  optim::SGD opt;
  explicit Rig(Device d = Device::cpu())
      : p(tensor({1.0, 2.0}, {f32, d}).set_requires_grad().set_name("layer.weight")),
        opt({{"layer.weight", p}}, optim::SGDOptions{.lr = 0.0}) {}
  amp::StepResult step(amp::GradScaler& s, bool overflow) {
    p.set_grad(Tensor());
    const Tensor g = tensor({1.0, overflow ? INFINITY : 1.0}, {f32, p.device()});
    s.scale(sum(p * g)).backward();
    amp::StepResult r = s.step(opt);
    s.update();
    return r;
  }
};

struct Observed {
  double scale;
  int64_t growth, hyst, streak;
  bool operator==(const Observed&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Observed& o) {
  return os << "{scale " << o.scale << ", growth " << o.growth << ", hysteresis " << o.hyst << ", streak " << o.streak
            << "}";
}

Observed observe(const amp::GradScaler& s) {
  const StateDict sd = s.state_dict();
  return {s.get_scale(), sd.at("_growth_tracker").item<int64_t>(), sd.at("_hysteresis_tracker").item<int64_t>(),
          s.skip_streak().item<int64_t>()};
}

double pow2(std::mt19937& rng, int lo, int hi) { return std::ldexp(1.0, std::uniform_int_distribution<int>(lo, hi)(rng)); }

}  // namespace

TEST_CASE("every state update() produces reloads, and the reloaded scaler continues identically",
          "[grad_scaler][state][property]") {
  std::mt19937 rng(20261204);
  for (int trial = 0; trial < 40; ++trial) {
    amp::GradScalerOptions o;
    o.init_scale = pow2(rng, -20, 24);
    o.growth_factor = std::array{2.0, 4.0, 1.5}[rng() % 3];
    o.backoff_factor = std::array{0.5, 0.25, 0.125}[rng() % 3];
    o.growth_interval = std::uniform_int_distribution<int>(1, 6)(rng);
    o.hysteresis = std::uniform_int_distribution<int>(1, 4)(rng);
    o.min_scale = trial % 3 == 0 ? 0x1p-24 : std::min(o.init_scale, pow2(rng, -126, 0));
    o.max_scale = trial % 2 ? INFINITY : std::max(o.init_scale, pow2(rng, 0, 30));
    o.skip_streak_limit = 0;
    // Long runs of overflows drive the scale onto its floor; long clean runs grow it.
    const double p_overflow = std::array{0.2, 0.6, 0.95}[trial % 3];
    INFO("trial " << trial << ": init " << o.init_scale << ", interval " << o.growth_interval << ", hysteresis "
                  << o.hysteresis << ", min " << o.min_scale << ", max " << o.max_scale << ", p " << p_overflow);
    amp::GradScaler straight(o);
    Rig a, b;
    // `chain` is rebuilt from the previous one's state after every step, by a scaler made
    // with default options: all it knows comes from the state dict.
    auto chain = std::make_unique<amp::GradScaler>(o);
    std::bernoulli_distribution overflow(p_overflow);
    for (int step = 0; step < 250; ++step) {
      const bool inf = overflow(rng);
      const bool skipped_a = a.step(straight, inf).skipped();
      const bool skipped_b = b.step(*chain, inf).skipped();
      INFO("step " << step);
      REQUIRE(skipped_a == inf);
      REQUIRE(skipped_b == inf);
      const StateDict sd = chain->state_dict();
      amp::GradScalerOptions fresh;
      fresh.skip_streak_limit = 0;
      auto next = std::make_unique<amp::GradScaler>(fresh);
      REQUIRE_NOTHROW(next->load_state_dict(sd));
      chain = std::move(next);
      REQUIRE(observe(*chain) == observe(straight));
      REQUIRE(straight.get_scale() >= o.min_scale);
    }
  }
}

TEST_CASE("two overflows in a row with default options leave a state that reloads", "[grad_scaler][state]") {
  Rig r;
  amp::GradScaler s;
  r.step(s, true);
  r.step(s, true);
  CHECK(s.state_dict().at("_hysteresis_tracker").item<int64_t>() == 0);
  amp::GradScaler t;
  REQUIRE_NOTHROW(t.load_state_dict(s.state_dict()));
  CHECK(t.get_scale() == 16384.0);
}

TEST_CASE("the scale stops at its floor, 2^-24 by default, and the run recovers", "[grad_scaler]") {
  Rig r;
  amp::GradScalerOptions o;
  o.skip_streak_limit = 0;
  amp::GradScaler s(o);
  CHECK(amp::GradScalerOptions{}.min_scale == 0x1p-24);
  for (int i = 0; i < 200; ++i) r.step(s, true);  // PyTorch's scale would be 2^16 / 2^200 = 0 (f32)
  CHECK(s.get_scale() == 0x1p-24);
  CHECK(s.skip_streak().item<int64_t>() == 200);
  amp::GradScaler reloaded(o);
  REQUIRE_NOTHROW(reloaded.load_state_dict(s.state_dict()));
  CHECK_FALSE(r.step(s, false).skipped());  // a clean step is taken again
  CHECK(s.skip_streak().item<int64_t>() == 0);

  amp::GradScalerOptions zero;
  zero.min_scale = 0;
  CHECK_THROWS_WITH(amp::GradScaler(zero), Catch::Contains("2^-126 <= min_scale") && Catch::Contains("default is 2^-24"));
}

TEST_CASE("states written before the floor and the tracker's stop at 0 still load", "[grad_scaler][state]") {
  amp::GradScaler s;
  StateDict old = s.state_dict();
  old.erase("_skip_streak");
  old["_hysteresis_tracker"] = full({}, -7, {i64});  // an earlier version counted below 0
  old["min_scale"] = full({}, 0.0, {f64});           // and 0 meant "no floor"
  old["scale"] = full({}, 0x1p-100, {f32});
  amp::GradScaler t;
  REQUIRE_NOTHROW(t.load_state_dict(old));
  CHECK(t.state_dict().at("_hysteresis_tracker").item<int64_t>() == 0);
  CHECK(t.options().min_scale == amp::kLowestMinScale);
  CHECK(t.get_scale() == 0x1p-100);
  CHECK(t.skip_streak().item<int64_t>() == 0);
  StateDict dead = old;
  dead["scale"] = full({}, 0.0, {f32});
  CHECK_THROWS_WITH(t.load_state_dict(dead), Catch::Contains("collapse to 0"));
}

TEST_CASE("a run of skipped steps is reported once, naming the parameters", "[grad_scaler][skip_streak]") {
  amp::GradScalerOptions o;
  o.skip_streak_limit = 5;
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    Rig r(d);
    amp::GradScaler s(o, d);
    WarningCapture w;
    for (int i = 0; i < 4; ++i) r.step(s, true);
    CHECK(w.messages().empty());
    for (int i = 0; i < 6; ++i) r.step(s, true);  // a GPU may report an update or two late
    REQUIRE(w.messages().size() == 1);
    const std::string m = w.messages()[0];
    CHECK_THAT(m, Catch::Contains("steps were all skipped (skip_streak_limit 5)") &&
                      Catch::Contains("layer.weight (1 of 2)") && Catch::Contains("DetectAnomaly"));
    for (int i = 0; i < 10; ++i) r.step(s, true);
    CHECK(w.messages().size() == 1);  // once per run
    r.step(s, false);
    for (int i = 0; i < 10; ++i) r.step(s, true);
    CHECK(w.messages().size() == 2);  // a new run is reported again
  }
}

TEST_CASE("skip_streak_limit 0 turns the watch off; SkipStreakAction::error throws from update()",
          "[grad_scaler][skip_streak]") {
  Rig r;
  {
    amp::GradScalerOptions off;
    off.skip_streak_limit = 0;
    amp::GradScaler s(off);
    WarningCapture w;
    for (int i = 0; i < 80; ++i) r.step(s, true);
    CHECK(w.messages().empty());
  }
  amp::GradScalerOptions o;
  o.skip_streak_limit = 3;
  o.on_skip_streak = amp::SkipStreakAction::error;
  amp::GradScaler s(o);
  r.step(s, true);
  r.step(s, true);
  CHECK_THROWS_WITH(r.step(s, true), Catch::Contains("the last 3 steps were all skipped"));
  // The scaler is ready for the next iteration: nothing was left half-done by the throw.
  CHECK_NOTHROW(r.step(s, false));
  CHECK(s.skip_streak().item<int64_t>() == 0);
  CHECK(amp::GradScalerOptions{}.skip_streak_limit == 50);
}
