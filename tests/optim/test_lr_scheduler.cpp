// Learning-rate schedulers: each lr sequence against PyTorch's formulas written out in
// the test, ReduceLROnPlateau's patience/cooldown/threshold, state dicts and errors.
#include <catch2/catch.hpp>

#include <thread>

#include <cmath>
#include <functional>
#include <numbers>

#include "halfgrad.h"

using namespace hg;
using namespace hg::optim;

namespace {

constexpr double kPi = std::numbers::pi;

// An SGD with two groups, lrs 0.1 and 0.02, over throwaway parameters.
struct TwoGroups {
  Tensor a = ones({1}).set_requires_grad(), b = ones({1}).set_requires_grad();
  SGD opt{std::vector<ParamGroup>{{.params = {a}, .lr = 0.1}, {.params = {b}, .lr = 0.02}}};
};

// Checks epochs 0..last: the lr after construction (epoch 0) and after each step against
// expect(epoch, base_lr), in the scheduler's report and in the optimizer's groups.
void check_sequence(LRScheduler& s, Optimizer& opt, int64_t last, const std::function<double(int64_t, double)>& expect,
                    const std::vector<double>& bases) {
  const WarningCapture stepped_without_optimizer;  // these tests step no optimizer
  for (int64_t e = 0; e <= last; ++e) {
    if (e > 0) s.step();
    CHECK(s.last_epoch() == e);
    for (size_t g = 0; g < bases.size(); ++g) {
      INFO("epoch " << e << " group " << g);
      const double want = expect(e, bases[g]);
      CHECK(s.get_last_lr()[g] == Approx(want).epsilon(1e-12).margin(1e-15));
      CHECK(*opt.param_groups()[g].lr == s.get_last_lr()[g]);
    }
  }
}

}  // namespace

TEST_CASE("StepLR decays by gamma every step_size epochs", "[lr_scheduler]") {
  TwoGroups t;
  StepLR s(t.opt, 3, 0.5);
  check_sequence(s, t.opt, 10, [](int64_t e, double base) { return base * std::pow(0.5, e / 3); }, {0.1, 0.02});
  CHECK(s.get_last_lr()[0] == Approx(0.1 / 8));  // epochs 9, 10: three decays
}

TEST_CASE("MultiStepLR decays at each milestone, a repeated one twice", "[lr_scheduler]") {
  TwoGroups t;
  MultiStepLR s(t.opt, {5, 2, 5}, 0.1);
  check_sequence(s, t.opt, 7, [](int64_t e, double base) { return base * (e < 2 ? 1.0 : e < 5 ? 0.1 : 0.001); },
                 {0.1, 0.02});
}

TEST_CASE("CosineAnnealingLR follows PyTorch's closed form", "[lr_scheduler]") {
  TwoGroups t;
  CosineAnnealingLR s(t.opt, 10, 1e-3);
  check_sequence(
      s, t.opt, 10, [](int64_t e, double base) { return 1e-3 + (base - 1e-3) * (1 + std::cos(kPi * e / 10.0)) / 2; },
      {0.1, 0.02});
  CHECK(s.get_last_lr()[0] == Approx(1e-3));  // eta_min at T_max
}

TEST_CASE("CosineAnnealingLR with linear warmup rises, then anneals to eta_min at T_max", "[lr_scheduler]") {
  TwoGroups t;
  CosineAnnealingLR s(t.opt, 12, 0.0, 4, 0.2);
  // Warmup as PyTorch's LinearLR(start_factor=0.2, total_iters=4), then the cosine over
  // the remaining 8 epochs.
  auto expect = [](int64_t e, double base) {
    if (e < 4) return base * (0.2 + 0.8 * e / 4.0);
    return base * (1 + std::cos(kPi * (e - 4) / 8.0)) / 2;
  };
  check_sequence(s, t.opt, 12, expect, {0.1, 0.02});
  CHECK(expect(0, 0.1) == Approx(0.02));
  CHECK(expect(4, 0.1) == Approx(0.1));
  CHECK(s.get_last_lr()[1] == Approx(0.0).margin(1e-18));
}

TEST_CASE("OneCycleLR follows PyTorch's two cosine phases", "[lr_scheduler]") {
  const WarningCapture no_optimizer_steps;  // stepping the schedule alone is the point here
  TwoGroups t;
  OneCycleLR s(t.opt, {0.1, 0.5}, 10, 0.3, 25.0, 1e4);
  CHECK(s.base_lrs() == std::vector<double>{0.1 / 25, 0.5 / 25});
  // PyTorch: phase 1 ends at step 0.3 * 10 - 1 = 2, phase 2 at step 9.
  auto expect = [](int64_t e, double max_lr) {
    const double initial = max_lr / 25, min_lr = initial / 1e4;
    auto anneal = [](double from, double to, double pct) { return to + (from - to) / 2 * (std::cos(kPi * pct) + 1); };
    if (e <= 2) return anneal(initial, max_lr, e / 2.0);
    return anneal(max_lr, min_lr, (e - 2) / 7.0);
  };
  check_sequence(s, t.opt, 10, expect, {0.1, 0.5});
  // Anchors worked out by hand: the start, the midpoint of the warmup, the peak, the end.
  CHECK(expect(0, 0.1) == Approx(0.004));
  CHECK(expect(1, 0.1) == Approx((0.1 + 0.004) / 2));
  CHECK(expect(2, 0.1) == Approx(0.1));
  CHECK(expect(9, 0.1) == Approx(4e-7));
  // Past total_steps is an error and changes nothing.
  const std::vector<double> before = s.get_last_lr();
  CHECK_THROWS_WITH(s.step(), Catch::Contains("stepped to step 11 but total_steps is 10"));
  CHECK(s.get_last_lr() == before);
  CHECK(s.last_epoch() == 10);
  CHECK(*t.opt.param_groups()[0].lr == before[0]);
}

TEST_CASE("OneCycleLR with a single max_lr applies it to every group", "[lr_scheduler]") {
  const WarningCapture no_optimizer_steps;  // stepping the schedule alone is the point here
  TwoGroups t;
  OneCycleLR s(t.opt, 0.2, 100);
  CHECK(s.get_last_lr()[0] == Approx(0.2 / 25));
  CHECK(s.get_last_lr()[1] == Approx(0.2 / 25));
  for (int i = 0; i < 29; ++i) s.step();  // phase 1 ends at step 29
  CHECK(s.get_last_lr()[1] == Approx(0.2));
}

TEST_CASE("ReduceLROnPlateau waits patience epochs, cools down, and respects the threshold", "[lr_scheduler]") {
  TwoGroups t;
  ReduceLROnPlateau s(t.opt, {.factor = 0.5, .patience = 2, .cooldown = 1});
  CHECK(s.get_last_lr() == std::vector<double>{0.1, 0.02});
  // 9.9995 is not better than 10 by the relative threshold 1e-4 (it needs < 9.999).
  const std::vector<double> metrics = {10, 9.9995, 10, 10, 10, 10, 10, 10, 9.0, 9.5};
  // bad epochs: 0, 1, 2, 3 -> cut (cooldown 1), cooldown eats one, 1, 2, 3 -> cut, best.
  const std::vector<double> factor = {1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25};
  for (size_t i = 0; i < metrics.size(); ++i) {
    INFO("step " << i);
    s.step(metrics[i]);
    CHECK(s.get_last_lr()[0] == Approx(0.1 * factor[i]));
    CHECK(*t.opt.param_groups()[1].lr == Approx(0.02 * factor[i]));
  }
  CHECK(s.best() == 9.0);
  CHECK(s.num_bad_epochs() == 1);
  CHECK_THROWS_WITH(s.step(), Catch::Contains("call step(metric)"));
}

TEST_CASE("ReduceLROnPlateau in max mode, with an absolute threshold and a floor", "[lr_scheduler]") {
  TwoGroups t;
  ReduceLROnPlateau s(t.opt, {.mode = PlateauOptions::Mode::max,
                              .patience = 0,
                              .threshold = 0.5,
                              .threshold_mode = PlateauOptions::Threshold::abs,
                              .min_lr = 0.05});
  s.step(1.0);  // better than -inf
  CHECK(s.get_last_lr()[0] == 0.1);
  // Not better by more than 0.5: cut to max(lr * 0.1, 0.05); the floor never raises
  // a group already below it (0.02).
  s.step(1.4);
  CHECK(s.get_last_lr() == std::vector<double>{0.05, 0.02});
  s.step(1.2);  // at the floor: unchanged
  CHECK(s.get_last_lr() == std::vector<double>{0.05, 0.02});
}

TEST_CASE("a scheduler's state_dict round trip continues the same sequence", "[lr_scheduler]") {
  const WarningCapture no_optimizer_steps;  // stepping the schedule alone is the point here
  {
    TwoGroups t;
    CosineAnnealingLR s(t.opt, 20, 1e-4, 5);
    for (int i = 0; i < 7; ++i) s.step();
    StateDict sd = s.state_dict(), osd = t.opt.state_dict();
    CHECK(sd.at("last_epoch").item<double>() == 7);

    TwoGroups u;
    u.opt.param_groups()[0].lr = 123.0;  // a base lr the load must replace
    CosineAnnealingLR s2(u.opt, 20, 1e-4, 5);
    u.opt.load_state_dict(osd);
    s2.load_state_dict(sd);
    CHECK(s2.get_last_lr() == s.get_last_lr());
    for (int i = 0; i < 5; ++i) {
      s.step();
      s2.step();
      CHECK(s2.get_last_lr() == s.get_last_lr());
    }
  }
  {
    TwoGroups t;
    ReduceLROnPlateau s(t.opt, {.patience = 3, .cooldown = 2});
    for (double m : {5.0, 4.0, 4.0, 4.0}) s.step(m);
    StateDict sd = s.state_dict();
    TwoGroups u;
    ReduceLROnPlateau s2(u.opt, {.patience = 3, .cooldown = 2});
    s2.load_state_dict(sd);
    CHECK(s2.best() == 4.0);
    CHECK(s2.num_bad_epochs() == 2);
    for (double m : {4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.0}) {
      s.step(m);
      s2.step(m);
      CHECK(s2.get_last_lr() == s.get_last_lr());
    }
    CHECK(s.get_last_lr()[0] == Approx(0.01));
  }
}

TEST_CASE("scheduler load_state_dict reports problems and loads nothing", "[lr_scheduler][errors]") {
  const WarningCapture no_optimizer_steps;  // stepping the schedule alone is the point here
  TwoGroups t;
  StepLR s(t.opt, 2);
  s.step();
  StateDict sd = s.state_dict();
  sd.erase("base_lr.1");
  sd["best"] = scalar_tensor(1.0, {f64});
  sd["last_epoch"] = scalar_tensor(-2.0, {f64});
  StepLR s2(t.opt, 2);
  CHECK_THROWS_WITH(s2.load_state_dict(sd), Catch::Contains("nothing was loaded") &&
                                                Catch::Contains("missing 'base_lr.1'") &&
                                                Catch::Contains("unexpected 'best'") && Catch::Contains("last_epoch"));
  CHECK(s2.last_epoch() == 0);
}

TEST_CASE("scheduler errors name the value and the valid range", "[lr_scheduler][errors]") {
  const WarningCapture no_optimizer_steps;  // stepping the schedule alone is the point here
  TwoGroups t;
  CHECK_THROWS_WITH(StepLR(t.opt, 0), Catch::Contains("StepLR: step_size must be > 0, got 0"));
  CHECK_THROWS_WITH(StepLR(t.opt, 2, -0.5), Catch::Contains("gamma must be > 0, got -0.5"));
  CHECK_THROWS_WITH(MultiStepLR(t.opt, {3, -1}), Catch::Contains("every milestone must be >= 0, got -1"));
  CHECK_THROWS_WITH(CosineAnnealingLR(t.opt, 0), Catch::Contains("T_max must be > 0"));
  CHECK_THROWS_WITH(CosineAnnealingLR(t.opt, 10, 0, 10), Catch::Contains("warmup_steps must be in [0, T_max), got 10"));
  CHECK_THROWS_WITH(CosineAnnealingLR(t.opt, 10, 0, 2, 1.5), Catch::Contains("warmup_start_factor must be in [0, 1]"));
  CHECK_THROWS_WITH(OneCycleLR(t.opt, 0.1, 0), Catch::Contains("total_steps must be > 0"));
  CHECK_THROWS_WITH(OneCycleLR(t.opt, 0.1, 10, 1.5), Catch::Contains("pct_start must be in [0, 1], got 1.5"));
  CHECK_THROWS_WITH(OneCycleLR(t.opt, std::vector<double>{0.1}, 10), Catch::Contains("1 max_lrs for 2 parameter groups"));
  CHECK_THROWS_WITH(ReduceLROnPlateau(t.opt, {.factor = 1.0}), Catch::Contains("factor must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(ReduceLROnPlateau(t.opt, {.patience = -1}), Catch::Contains("patience must be >= 0"));
  StepLR s(t.opt, 2);
  t.opt.add_param_group({.params = {ones({1}).set_requires_grad()}});
  CHECK_THROWS_WITH(s.step(), Catch::Contains("the optimizer has 3 parameter groups but the scheduler was made for 2"));
}

TEST_CASE("a scheduler stepped before its optimizer warns once, as PyTorch does", "[lr_scheduler][warning]") {
  const auto warned = [](const WarningCapture& w) {
    return w.messages().size() == 1 && w.messages()[0].find("StepLR.step() was called before the optimizer's first "
                                                           "step()") != std::string::npos &&
           w.messages()[0].find("first value is skipped") != std::string::npos;
  };
  {
    TwoGroups t;
    StepLR s(t.opt, 1, 0.5);
    const WarningCapture w;
    s.step();
    CHECK(warned(w));
    s.step();
    t.opt.step();
    s.step();
    CHECK(w.messages().size() == 1);  // only the first step can skip the first value
  }
  {
    TwoGroups t;
    StepLR s(t.opt, 1, 0.5);
    const WarningCapture w;
    t.opt.step();
    s.step();
    CHECK(w.messages().empty());  // the right order
  }
  {
    // An optimizer stepped before the scheduler existed does not count (PyTorch's rule too).
    TwoGroups t;
    t.opt.step();
    StepLR s(t.opt, 1, 0.5);
    const WarningCapture w;
    s.step();
    CHECK(warned(w));
  }
  {
    // A step GradScaler skipped for an inf gradient still counts: the lr was offered to it.
    Tensor p = ones({1}).set_requires_grad();
    SGD opt({p}, {.lr = 0.1});
    StepLR s(opt, 1, 0.5);
    amp::GradScaler scaler;
    scaler.scale(sum(p * 1e300)).backward();
    const WarningCapture w;
    CHECK(scaler.step(opt).skipped());
    scaler.update();
    s.step();
    CHECK(w.messages().empty());
    CHECK(p.item<double>() == 1.0);  // the step was skipped
  }
}

TEST_CASE("hg::warn goes to the innermost WarningCapture, every time", "[warning]") {
  const WarningCapture outer;
  {
    const WarningCapture inner;
    warn("test warning");
    warn("test warning");
    CHECK(inner.messages() == std::vector<std::string>{"test warning", "test warning"});
  }
  CHECK(outer.messages().empty());  // the innermost capture took them
  warn("after");
  CHECK(outer.messages() == std::vector<std::string>{"after"});
}

TEST_CASE("hg::warn goes to an installed handler, from any thread, when nothing captures", "[warning]") {
  std::vector<std::string> got;
  WarningHandler previous = set_warning_handler([&](const std::string& m) { got.push_back(m); });
  warn("from main");
  std::thread([] { warn("from another thread"); }).join();
  {
    const WarningCapture mine;  // a capture on this thread still comes first
    warn("captured");
  }
  set_warning_handler(std::move(previous));
  CHECK(got == std::vector<std::string>{"from main", "from another thread"});
}
