// segbench's update/weight ratios and the diagnosis built on them: the probe against
// updates computed by hand (an SGD step; Adam's m / eps once f16 state flushed v), the
// trainer's samples, and the rule that names oversized updates, silent on normal ones.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "bench/segbench/diagnosis.h"
#include "bench/segbench/report_parts.h"
#include "bench/segbench/train.h"
#include "bench/segbench/update_stats.h"
#include "framework/half.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "ops/elementwise.h"

using namespace hg;
using namespace hg::segbench;
using Catch::Contains;

TEST_CASE("update probe: an SGD step's update/weight ratios match the hand-computed update", "[segbench][updates]") {
  Tensor w = tensor({3.0f, 4.0f}).set_requires_grad().set_name("w");
  Tensor b = tensor({10.0f, 0.0f}).set_requires_grad().set_name("b");
  optim::SGD opt(optim::Params{{"w", w}, {"b", b}}, optim::SGDOptions{.lr = 0.5});
  w.set_grad(tensor({1.0f, 2.0f}));
  b.set_grad(tensor({0.5f, 30.0f}));
  const UpdateProbe probe(opt);
  opt.step();
  const UpdateSample u = probe.measure(4, false);
  // dw = -0.5 g: w moves by (-0.5, -1), b by (-0.25, -15).
  CHECK(u.step == 4);
  CHECK(u.lr == 0.5);
  CHECK_FALSE(u.skipped);
  CHECK(u.ratio == Approx(std::sqrt(0.25 + 1 + 0.0625 + 225) / std::sqrt(9.0 + 16 + 100)));
  REQUIRE(u.layers.size() == 2);
  CHECK(u.layers[0].name == "w");
  CHECK(u.layers[0].ratio == Approx(std::sqrt(1.25) / 5));
  CHECK(u.layers[1].ratio == Approx(std::sqrt(225.0625) / 10));
  CHECK(u.layers[0].unchanged_fraction == 0);
  CHECK(u.max_layer == "b");
  CHECK(u.max_layer_ratio == Approx(std::sqrt(225.0625) / 10));
  CHECK(u.big_step_fraction == 0.25);  // only b[1] moved more than 10 lr = 5
  CHECK(u.grad_zero_fraction == 0);
  CHECK(u.v_lost_fraction == -1);  // no second moment: SGD
  CHECK(u.eps_only_share == -1);

  const UpdateSample skipped = UpdateProbe(opt).measure(5, true);
  CHECK(skipped.skipped);
  CHECK(skipped.ratio == 0);
  CHECK(skipped.layers.empty());
}

TEST_CASE("update probe: with f16 Adam state a flushed v and a zero gradient give the m / eps step",
          "[segbench][updates]") {
  // Step 1: g = 1e-4, so m = 0.1 g and v = 1e-3 g^2 = 1e-11, which is 0 in f16. Step 2: g = 0
  // (what a flushed f16 gradient is), so the update reads v = 0 and steps lr * m_hat / eps with
  // m_hat = 0.9 m / (1 - 0.9^2). With f32 state v remembers step 1 and the step stays small.
  constexpr double kLr = 1e-4;
  const double g1 = static_cast<double>(half(1e-4));
  const double m1 = static_cast<double>(half(0.1f * static_cast<float>(g1)));  // computed in f32, stored in f16
  const double expected_step = 0.9 * m1 / (1 - 0.81) / 1e-8;  // in units of lr: ~4,700
  UpdateSample second[2];
  for (const bool f16_state : {true, false}) {
    INFO("state in f16: " << f16_state);
    Tensor w = tensor({1.0f}).to(f16).set_requires_grad().set_name("w");
    optim::Adam opt(optim::Params{{"w", w}}, optim::AdamOptions{.lr = kLr});
    opt.set_state_in_param_dtype(f16_state);
    w.set_grad(tensor({g1}).to(f16));
    const UpdateProbe p1(opt);
    opt.step();
    const UpdateSample first = p1.measure(0, false);
    CHECK(first.v_lost_fraction == 0);  // m was 0 before the first step
    CHECK(first.eps_only_fraction == 0);
    CHECK(first.v_flushed_fraction == (f16_state ? 1.0 : 0.0));
    // lr = 1e-4 is below half an ulp of 1.0 in f16 (2^-12): the first update is rounded away.
    CHECK(first.layers[0].unchanged_fraction == 1);
    w.set_grad(tensor({0.0}).to(f16));
    const UpdateProbe p2(opt);
    opt.step();
    second[f16_state] = p2.measure(1, false);
  }
  const UpdateSample& s16 = second[1];
  CHECK(s16.grad_zero_fraction == 1);
  CHECK(s16.v_lost_fraction == 1);
  CHECK(s16.eps_only_fraction == 1);
  CHECK(s16.eps_only_share == 1);
  CHECK(s16.eps_only_mean_step == Approx(expected_step).epsilon(2e-3));  // the f16 weight rounds the step
  CHECK(s16.ratio == Approx(expected_step * kLr).epsilon(2e-3));
  const UpdateSample& s32 = second[0];
  CHECK(s32.v_lost_fraction == 0);
  CHECK(s32.eps_only_fraction == 0);
  CHECK(s32.ratio < s16.ratio / 1000);
}

namespace {

RunResult run_with_ratios(const std::string& precision, const std::string& state, std::vector<double> ratios) {
  RunResult r;
  r.precision = precision;
  r.optimizer_name = "Adam";
  r.optimizer_state_dtype = state;
  r.params_dtype = precision == "fp32" ? "f32" : precision == "amp-master" ? "f16 (f32 master)" : "f16";
  for (size_t s = 0; s < ratios.size(); ++s) {
    UpdateSample u;
    u.step = static_cast<int64_t>(s);
    u.ratio = ratios[s];
    u.max_layer = "enc0.conv1.weight";
    u.max_layer_ratio = 3 * ratios[s];
    u.lr = 0.01;
    u.big_step_fraction = ratios[s] > 1 ? 0.4 : 0.0;
    u.v_lost_fraction = u.eps_only_fraction = 0;
    u.v_lost_share = u.eps_only_share = 0;
    r.updates.push_back(u);
  }
  return r;
}

Report report_of(std::vector<RunResult> runs) {
  Report rep;
  rep.runs = std::move(runs);
  diagnose(rep);
  return rep;
}

}  // namespace

TEST_CASE("fp16 diagnosis: oversized finite updates are named with their m / eps source", "[segbench][updates]") {
  RunResult fp16 = run_with_ratios("fp16", "m, v f16", {0.05, 60, 40, 0.05});
  fp16.updates.resize(3);  // step 3's loss was NaN: the run stopped before its update
  UpdateSample& worst = fp16.updates[1];
  worst.v_lost_fraction = 0.35;
  worst.v_lost_share = 0.97;
  worst.eps_only_fraction = 0.3;
  worst.eps_only_share = 0.9;
  worst.eps_only_mean_step = 4700;
  fp16.first_nonfinite_step = 3;
  fp16.stopped_early = true;
  fp16.stop_reason = "non-finite loss (nan) at step 3";
  fp16.adam_v_flushed_fraction = 0.99;
  const Report rep = report_of({run_with_ratios("fp32", "m, v f32", {0.05, 0.05, 0.05, 0.05}), fp16,
                                run_with_ratios("amp-master", "m, v f32", {0.05, 0.055, 0.05, 0.05})});
  const std::string& d = rep.runs[1].diagnosis;
  INFO(d);
  CHECK_THAT(d, Contains("Training stopped: non-finite loss (nan) at step 3"));
  CHECK_THAT(d, Contains("Steps 1-2 were finite, but the updates were up to 1200 x fp32's"));
  CHECK_THAT(d, Contains("at step 1 the update/weight ratio ||w_after - w_before|| / ||w_before|| was 60"));
  CHECK_THAT(d, Contains("largest layer 180, enc0.conv1.weight) against 0.05"));
  CHECK_THAT(d, Contains("40.0% of the weights moved by more than 10 x lr (lr = 0.01; 0.0% in fp32)"));
  CHECK_THAT(d, Contains("90.0% of that update (by squared norm) came from the 30.0% of weights"));
  CHECK_THAT(d, Contains("m / eps with eps = 1e-8: each of them moved 4700 x lr on average"));
  CHECK_THAT(d, Contains("In all, 35.0% of the weights started the step with Adam's stored second moment v = 0"));
  CHECK_THAT(d, Contains("Step 0 was normal (ratio 0.05 against 0.05)"));
  CHECK_THAT(d, Contains("wrecked the weights before the loss became non-finite at step 3"));
  CHECK_THAT(d, Contains("A loss scaler would not have prevented this"));
  CHECK_THAT(d, Contains("amp-master (f32 master weights, Adam state f32) stepped at most 1.10 x fp32's"));
  CHECK_THAT(d, !Contains("no loss scaler to skip it"));
  CHECK(rep.runs[2].diagnosis.find("finite, but") == std::string::npos);

  // The same jump where flushed v carried little of it: the sentence says so, no remedy.
  fp16.updates[1].v_lost_share = 0.1;
  fp16.updates[1].eps_only_share = 0.05;
  const std::string other = report_of({run_with_ratios("fp32", "m, v f32", {0.05, 0.05, 0.05}), fp16}).runs[1].diagnosis;
  CHECK_THAT(other, Contains("Adam's second moment does not explain it"));
  CHECK_THAT(other, !Contains("A loss scaler would not"));
}

TEST_CASE("fp16 diagnosis: normal-sized updates raise nothing, and the report shows the ratios", "[segbench][updates]") {
  RunResult fp16 = run_with_ratios("fp16", "m, v f16", {0.05, 0.3, 0.4});  // at most 8 x fp32's
  fp16.updates[2].skipped = true;
  const Report rep = report_of({run_with_ratios("fp32", "m, v f32", {0.05, 0.05, 0.05}), fp16});
  INFO(rep.runs[1].diagnosis);
  CHECK(rep.runs[1].diagnosis.find("finite, but") == std::string::npos);
  CHECK(rep.runs[1].diagnosis.find("m / eps") == std::string::npos);

  const TextTable t = update_cells(rep);
  REQUIRE(t.header.size() == 2 + 3 + 1);
  CHECK(t.header[2] == "step 0");
  CHECK(t.rows[0].back() == "\u2013 (reference)");
  CHECK(t.rows[1][3] == "0.3");
  CHECK(t.rows[1][4] == "skipped");
  CHECK_THAT(t.rows[1].back(), Contains("6.00\u00d7 (step 1"));
  const std::string md = markdown_report(rep, SampleGrid{});
  CHECK_THAT(md, Contains("## Update size over the first steps"));
  CHECK_THAT(md, Contains("| fp16 | m, v f16 | 0.05 | 0.3 | skipped |"));
  const std::string html = html_report(rep, SampleGrid{});
  CHECK_THAT(html, Contains("Update/weight ratio over the first steps"));
}

TEST_CASE("segbench records the first steps' updates, none for a step it stopped on", "[segbench][updates]") {
  Config c;
  c.profile = "quick";
  c.steps = 4;
  c.batch = 2;
  c.size = 32;
  c.width = 4;
  c.growth_interval = 10;
  c.val_images = 2;
  c.progress = false;
  c.poison_step = 2;  // a NaN pixel: fp32 has no scaler, so step 2 stops the run unapplied
  const ValidationSet val = make_validation_set(c);
  const RunResult r = train_run(c, "fp32", Device::cpu(), val, {});
  REQUIRE(r.updates.size() == 2);
  double v_flushed = -1;
  for (int64_t s = 0; s < 2; ++s) {
    const UpdateSample& u = r.updates[static_cast<size_t>(s)];
    CHECK(u.step == s);
    CHECK(u.ratio > 0);
    CHECK(std::isfinite(u.ratio));
    CHECK(u.layers.size() == r.updates[0].layers.size());
    CHECK(u.v_lost_fraction == 0);  // f32 state: v never flushes here
    v_flushed = std::max(v_flushed, u.v_flushed_fraction);
  }
  CHECK(r.adam_v_flushed_fraction == v_flushed);
}
