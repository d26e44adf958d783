// segbench's modes and stored-gradient statistics: each ablation differs from its base
// recipe in exactly one ingredient, --ablations appends the ladder, and the f16 bands
// (flush <= 2^-25, subnormal below 2^-14, overflow from 65520) count hand-placed values.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "bench/segbench/flags.h"
#include "bench/segbench/grad_stats.h"
#include "bench/segbench/modes.h"
#include "framework/error.h"

using namespace hg;
using namespace hg::segbench;

TEST_CASE("segbench ablations switch off one ingredient of their base recipe", "[segbench][modes]") {
  const Mode noscale = mode("amp-noscale"), amp = mode("amp");
  CHECK(amp.recipe.loss_scaling);
  CHECK_FALSE(noscale.recipe.loss_scaling);
  CHECK(noscale.recipe.autocast == amp.recipe.autocast);
  CHECK(noscale.ablation);
  CHECK_FALSE(amp.ablation);

  const Mode f32state = mode("fp16-f32state"), fp16 = mode("fp16");
  CHECK(fp16.recipe.optimizer_state_in_param_dtype);
  CHECK_FALSE(f32state.recipe.optimizer_state_in_param_dtype);
  CHECK(f32state.recipe.policy.params == f16);
  CHECK(fp16.optimizer_state_dtype() == "m, v f16");
  CHECK(f32state.optimizer_state_dtype() == "m, v f32");

  for (const char* name : {"fp32-sgd", "amp-sgd", "fp16-sgd"}) {
    INFO(name);
    const Mode m = mode(name), base = mode(std::string(name).substr(0, std::string(name).size() - 4));
    CHECK(m.optimizer == OptimizerKind::sgd);
    CHECK(base.optimizer == OptimizerKind::adam);
    CHECK(m.recipe.loss_scaling == base.recipe.loss_scaling);
    CHECK(m.recipe.policy.params == base.recipe.policy.params);
  }
  CHECK(mode("fp16-sgd").optimizer_state_dtype() == "momentum f16");
  CHECK_THROWS_WITH(mode("amp-bogus"), Catch::Contains("amp-noscale") && Catch::Contains("fp16-sgd"));
}

TEST_CASE("segbench modes name the dtype of what they store", "[segbench][modes]") {
  CHECK(mode("fp32").grads_dtype() == "f32");
  CHECK(mode("amp").params_dtype() == "f32");
  CHECK(mode("amp").activations_dtype() == "f16");
  CHECK(mode("amp").grads_dtype() == "f16 -> f32");
  CHECK(mode("amp-master").params_dtype() == "f16 (f32 master)");
  CHECK(mode("amp-master").grads_dtype() == "f16 -> f32");
  CHECK(mode("bf16").grads_dtype() == "bf16 -> f32");
  CHECK(mode("fp16").grads_dtype() == "f16");
}

TEST_CASE("segbench --ablations appends the ladder once, after the chosen modes", "[segbench][modes][flags]") {
  Flags f = parse_flags({"segbench", "--precision", "fp32,amp-sgd", "--ablations"});
  REQUIRE(f.run);
  CHECK(f.config.precisions ==
        std::vector<std::string>{"fp32", "amp-sgd", "amp-noscale", "fp16-f32state", "fp32-sgd", "fp16-sgd"});
  f = parse_flags({"segbench", "--precision", "fp16-f32state"});
  REQUIRE(f.run);
  CHECK(f.config.precisions == std::vector<std::string>{"fp16-f32state"});
  f = parse_flags({"segbench", "--precision", "amp-nosale"});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.message, Catch::Contains("amp-noscale"));
}

TEST_CASE("gradient exponents count f16's bands on the stored values", "[segbench][modes]") {
  // 2^-25 is the tie between 0 and 2^-24 and rounds to even (0): it flushes; 1.5 * 2^-25
  // rounds up to 2^-24 (subnormal); 70000 is past 65520, the first value rounding to inf.
  const std::vector<double> v{0, 0x1p-26, 0x1p-25, -0x1.8p-25, 0x1p-20, 1.0, 70000};
  const GradientExponents e = gradient_exponents(from_vector(v, {7}), 4.0);
  CHECK(e.dtype == "f32");
  CHECK(e.numel == 7);
  CHECK(e.zeros == 1);
  CHECK(e.flush == 2);
  CHECK(e.subnormal == 2);
  CHECK(e.overflow == 1);
  // Divided by the scale 4: 2^-28, 2^-27 and 1.5 * 2^-27 are <= 2^-25; 2^-22 is not.
  CHECK(e.would_flush == Approx(3.0 / 7.0));
  auto bin = [&](int k) { return e.bins[static_cast<size_t>(k - GradientExponents::kLo)]; };
  CHECK(bin(-26) == 1);
  CHECK(bin(-25) == 2);
  CHECK(bin(-20) == 1);
  CHECK(bin(0) == 1);
  CHECK(bin(16) == 1);
}

TEST_CASE("stored gradient statistics keep the counterfactual apart from real flushes", "[segbench][modes]") {
  Tensor w32 = from_vector({1, 2, 3, 4}, {4}), w16 = from_vector({1, 2, 3, 4}, {4}, TensorOptions{.dtype = f16});
  w32.set_requires_grad(true);
  w16.set_requires_grad(true);
  // Stored with scale 1024: 2^-16 / 1024 = 2^-26 would flush unscaled, 2^-10 / 1024 = 2^-20 would not.
  w32.set_grad(from_vector({0, 0x1p-16, 0x1p-10, 1.0}, {4}));
  w16.set_grad(from_vector({0, 0, 0x1p-24, 1.0}, {4}, TensorOptions{.dtype = f16}));
  const std::vector<LayerStats> s = stored_gradient_stats({{"a", w32}, {"b", w16}}, 1024.0);
  REQUIRE(s.size() == 2);
  CHECK(s[0].grad_dtype == "f32");
  CHECK(s[0].grad_zero_fraction == 0.25);
  CHECK(s[0].grad_underflow_fraction == 0.25);
  CHECK(s[0].grad_amax == 1.0 / 1024);
  CHECK(s[1].grad_dtype == "f16");
  CHECK(s[1].grad_zero_fraction == 0.5);
  CHECK(s[1].grad_underflow_fraction == -1.0);  // stored in f16: no counterfactual
  CHECK(s[1].grad_subnormal_fraction == 0.25);  // 2^-24
}
