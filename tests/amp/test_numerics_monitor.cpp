// The numerics monitor on constructed cases: a layer whose gradients underflow shows
// the flush fraction computed by hand; a layer that overflows is named first.
#include <catch2/catch.hpp>

#include "halfgrad.h"
#include "tests/amp/debug_models.h"

using namespace hg;

namespace {
struct TinyGrad : nn::Module {
  HG_CHILD(nn::Linear, fc, 4, 1, false);
  Tensor forward_impl(const Tensor& x) override { return (*fc)(x); }
  std::string type_name() const override { return "TinyGrad"; }
};
}  // namespace

TEST_CASE("NumericsMonitor: weight gradients that flush to zero in f16 show the expected fraction", "[amp][monitor]") {
  TinyGrad model;
  amp::NumericsMonitor mon(model, {.every = 2});
  // loss = 1e-6 * sum(y): d loss / d w_j = 1e-6 * sum_b x_bj = {1e-6, 1e-6, 1e-10, 1e-10}.
  // 1e-10 is below 2^-25 (it becomes 0 in f16); 1e-6 is an f16 subnormal.
  Tensor x = from_data(std::vector<float>{1, 1, 1e-4f, 1e-4f, 0, 0, 0, 0}, {2, 4}, {f32});
  for (int64_t step = 0; step < 3; ++step) {
    mon.begin_step(step);
    mul(sum(model(x)), 1e-6).backward();
    mon.end_step();
    model.zero_grad();
  }
  const auto& recs = mon.records();
  const amp::NumericsRecord* grad = nullptr;
  int64_t sampled_steps = 0;
  for (const auto& r : recs) {
    CHECK(r.step % 2 == 0);  // step 1 is not sampled
    if (r.kind == amp::TensorKind::weight_grad && r.module == "fc" && r.step == 2) grad = &r;
    sampled_steps += r.kind == amp::TensorKind::weight && r.module == "fc";
  }
  CHECK(sampled_steps == 2);
  REQUIRE(grad != nullptr);
  CHECK(grad->param == "weight");
  CHECK(grad->stats.numel == 4);
  CHECK(grad->stats.f16_flush == 2);
  CHECK(grad->stats.f16_subnormal == 2);  // the two 1e-6; the flushed values are not counted twice
  CHECK(grad->stats.fraction(grad->stats.f16_flush) == 0.5);
  const std::string table = mon.worst_table(3);
  CHECK_THAT(table, Catch::StartsWith("fc weight grad (f32): ") && Catch::Contains("50.0% would underflow in f16"));
  CHECK_FALSE(mon.first_overflow());
  const std::string lines = mon.jsonl();
  CHECK_THAT(lines, Catch::Contains("\"kind\":\"weight_grad\"") && Catch::Contains("\"f16_flush\":2"));
  // activation, activation grad, weight, weight grad of fc, plus the model's output
  // and its gradient, on 2 sampled steps.
  CHECK(recs.size() == 12);
}

TEST_CASE("NumericsMonitor names the layer whose output overflows f16", "[amp][monitor]") {
  manual_seed(21);
  test::OverflowNet model(1e4);
  amp::NumericsMonitor mon(model, {.every = 1});
  Tensor x = randn({8, 4}, {f32});

  SECTION("f32 run: big's output is finite but beyond the f16 range") {
    mon.begin_step(0);
    sum(model(x)).backward();
    mon.end_step();
    auto first = mon.first_overflow();
    REQUIRE(first);
    CHECK(first->module == "big");
    CHECK(first->kind == amp::TensorKind::activation);
    CHECK(first->stats.nonfinite() == 0);
    CHECK(first->stats.f16_overflow > 0);
    // shrink's weight gradient (big's output times the incoming gradient) is beyond the
    // f16 range too; the headline still names the origin.
    CHECK_THAT(mon.worst_table(6), Catch::StartsWith("overflow starts at: big activation (step 0)\n") &&
                                       Catch::Contains("\nbig activation (f32): ") &&
                                       Catch::Contains("overflow f16 (|x| >= 65520 rounds to inf)"));
  }
  SECTION("under autocast f16: big's output holds inf, and later layers inherit it") {
    mon.begin_step(0);
    {
      amp::Autocast ac(f16);
      Tensor y = model(x);
      (void)y;
    }
    mon.end_step();
    auto first = mon.first_overflow();
    REQUIRE(first);
    CHECK(first->module == "big");
    CHECK(first->dtype == f16);
    CHECK(first->stats.inf > 0);
  }
}

TEST_CASE("NumericsMonitor rejects bad options", "[amp][monitor]") {
  TinyGrad model;
  CHECK_THROWS_WITH(amp::NumericsMonitor(model, {.every = 0}), Catch::Contains("every must be >= 1"));
}
