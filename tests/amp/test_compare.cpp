// compare(): the same batch in f32 and under a policy, per-module errors; the
// injected overflow-prone layer is the first module over the threshold; the model runs
// as the user set it, the generator is restored, thresholds are per dtype.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "halfgrad.h"
#include "tests/amp/debug_models.h"

using namespace hg;

namespace {
Tensor mse_to_zero(const Tensor& y) { return mean(square(y)); }
}  // namespace

TEST_CASE("compare finds the injected overflowing layer and restores the model", "[amp][compare]") {
  manual_seed(21);
  test::OverflowNet model(1e4);
  Tensor x = randn({8, 4}, {f32});
  StateDict before;
  for (auto& [k, v] : model.state_dict()) before[k] = v.clone();

  amp::Comparison c = amp::compare(model, x, mse_to_zero, amp::recipe("amp").policy);
  REQUIRE(c.first_exceeding);
  CHECK(c.modules[*c.first_exceeding].module == "big");
  REQUIRE(c.modules.size() == 4);  // fc1, big, shrink, the model
  CHECK(c.modules[0].module == "fc1");
  CHECK(c.modules[0].dtype == f16);
  CHECK(c.modules[0].activation_error < 1e-2);  // f16 rounding only
  CHECK(c.modules[0].activation_error > 0);
  CHECK(std::isinf(c.modules[1].activation_error));
  CHECK_THAT(c.table(), Catch::Contains("first module over the threshold 0.01: big"));
  CHECK_THAT(c.json(), Catch::Contains("\"first_exceeding\":\"big\""));

  for (auto& [k, v] : model.state_dict()) {
    CHECK(v.dtype() == f32);
    CHECK(allclose(v, before[k], 0, 0));
  }
  for (auto& p : model.parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("compare on a healthy model: small errors everywhere, in f16 and bf16", "[amp][compare]") {
  manual_seed(5);
  test::OverflowNet model(1.0);
  Tensor x = randn({16, 4}, {f32});
  amp::Comparison f16c = amp::compare(model, x, mse_to_zero, amp::recipe("amp").policy, {.threshold = 0.05});
  CHECK_FALSE(f16c.first_exceeding);
  // 2^16 overflows shrink's f16 weight gradient here; the scale came down as a scaler's would.
  CHECK(f16c.loss_scale < 65536);
  CHECK(f16c.loss_scale >= 1);
  amp::Comparison bf16c = amp::compare(model, x, mse_to_zero, amp::recipe("bf16").policy, {.threshold = 0.05});
  CHECK_FALSE(bf16c.first_exceeding);
  // bf16 keeps 8 significant bits to f16's 11: its errors are larger.
  CHECK(bf16c.modules[0].activation_error > f16c.modules[0].activation_error);
  for (const auto& m : f16c.modules) CHECK(m.activation_error < 0.05);
  // Parameters cast to f16 (O2/O3 policies) work too and are restored to f32.
  amp::Comparison pure = amp::compare(model, x, mse_to_zero, amp::recipe("amp-master").policy, {.threshold = 0.05});
  CHECK(pure.modules.size() == 4);
  for (auto& p : model.parameters()) CHECK(p.dtype() == f32);
  CHECK_THROWS_WITH(amp::compare(model, x, mse_to_zero, amp::Policy{}, {.threshold = 0}),
                    Catch::Contains("threshold must be > 0"));
}

namespace {
struct DropNet : nn::Module {
  HG_CHILD(nn::Linear, fc1, 4, 32);
  HG_CHILD(nn::Dropout, drop, 0.5);
  HG_CHILD(nn::Linear, fc2, 32, 1);
  Tensor forward_impl(const Tensor& x) override { return (*fc2)((*drop)(relu((*fc1)(x)))); }
  std::string type_name() const override { return "DropNet"; }
};

const amp::ModuleComparison& find(const amp::Comparison& c, const std::string& module) {
  for (const auto& m : c.modules)
    if (m.module == module) return m;
  FAIL("no module " << module);
  return c.modules.front();
}
}  // namespace

TEST_CASE("compare runs the model as the user set it and restores the generator", "[amp][compare]") {
  manual_seed(3);
  DropNet model;
  Tensor x = randn({16, 4}, {f32});
  model.fc2->set_precision(f32);
  const Generator& gen = default_generator();
  const uint64_t seed = gen.seed(), draws = gen.draws();

  // In train() mode: both passes draw the same dropout mask, so the dropout output
  // differs by f16 rounding only (with two masks, half its elements would differ).
  amp::Comparison c = amp::compare(model, x, mse_to_zero, amp::recipe("amp").policy);
  CHECK(gen.seed() == seed);
  CHECK(gen.draws() == draws);  // the generator is where the user left it
  CHECK(find(c, "drop").activation_error < 1e-2);
  CHECK(find(c, "drop").activation_error > 0);
  CHECK(find(c, "fc1").dtype == f16);
  CHECK(find(c, "fc2").dtype == f32);  // its precision override applied
  CHECK(model.is_training());
  CHECK(model.drop->is_training());
  CHECK(model.fc2->precision() == f32);
  CHECK_FALSE(model.fc1->precision());

  model.eval();
  amp::compare(model, x, mse_to_zero, amp::recipe("bf16").policy);
  CHECK_FALSE(model.is_training());
  CHECK_FALSE(model.drop->is_training());
  CHECK(gen.draws() == draws);
}

TEST_CASE("compare holds bf16 modules to 8x the f16 threshold (their unit roundoff is 8x)", "[amp][compare]") {
  manual_seed(5);
  test::OverflowNet model(1.0);
  Tensor x = randn({16, 4}, {f32});
  // The bf16 errors of a healthy model, then a threshold an f16 module would exceed at
  // that size but a bf16 one may reach: e / 4 (before, one threshold for both).
  amp::Comparison wide = amp::compare(model, x, mse_to_zero, amp::recipe("bf16").policy, {.threshold = 1.0});
  double e = 0;
  for (const auto& m : wide.modules) {
    REQUIRE(m.dtype == bf16);
    e = std::max({e, m.activation_error, m.grad_error});
  }
  REQUIRE(e > 0);
  const double t = e / 4;
  amp::Comparison c = amp::compare(model, x, mse_to_zero, amp::recipe("bf16").policy, {.threshold = t});
  CHECK_FALSE(c.first_exceeding);
  for (const auto& m : c.modules) {
    CHECK(m.threshold == 8 * t);
    CHECK_FALSE(m.exceeds);
  }
  amp::Comparison h = amp::compare(model, x, mse_to_zero, amp::recipe("amp").policy, {.threshold = t});
  CHECK(h.modules[0].dtype == f16);
  CHECK(h.modules[0].threshold == t);
  CHECK_THAT(c.json(), Catch::Contains("\"threshold\":"));
}

// Healthy models: no false alarm. An attention's k_proj bias gradient is zero in exact
// arithmetic (softmax ignores a shift of the logits), rounding noise in both passes; held
// to its own norm, its relative error is ~1e3 and compare() named k_proj in every
// attention model. It is now measured against 0.1 of its module's gradient norm.
TEST_CASE("compare raises no false alarm on a bare MultiheadAttention and GPT", "[amp][compare]") {
  auto check_healthy = [](const amp::Comparison& c) {
    INFO(c.table());
    CHECK_FALSE(c.first_exceeding);
    for (const auto& m : c.modules) CHECK_FALSE(m.exceeds);
  };
  SECTION("MultiheadAttention") {
    manual_seed(1);
    nn::MultiheadAttention mha(32, 4);
    Tensor x = randn({4, 12, 32});
    for (const char* recipe : {"amp", "bf16"}) {
      amp::Comparison c = amp::compare(mha, x, mse_to_zero, amp::recipe(recipe).policy);
      check_healthy(c);
      // The floor acts: k_proj's bias gradient is nearly nothing next to its weight's.
      CHECK(find(c, "k_proj").grad_error < find(c, "k_proj").threshold);
    }
  }
  SECTION("GPT") {
    manual_seed(2);
    GPT gpt({.vocab_size = 40, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32});
    Tensor tokens = randint(0, 40, {4, 16}), targets = randint(0, 40, {4, 16});
    auto loss = [&](const Tensor& logits) { return cross_entropy(logits.reshape({64, 40}), targets.reshape({64})); };
    for (const char* recipe : {"amp", "bf16"}) check_healthy(amp::compare(gpt, tokens, loss, amp::recipe(recipe).policy));
  }
  SECTION("U-Net in train mode") {
    // BatchNorm's backward cancels most of the gradient (it subtracts its batch mean), so the
    // deep layers' weight gradients differ by 10-20% in f16 and up to ~60% in bf16: healthy,
    // the run trains as fp32 does, and held to grad_threshold, not to the output threshold.
    manual_seed(6);
    UNet unet(1, 4, 8);
    Tensor x = randn({4, 32, 32, 1}), y = randint(0, 4, {4, 32, 32});
    auto loss = [&](const Tensor& logits) { return cross_entropy(logits.reshape({-1, 4}), y.reshape({-1})); };
    for (const char* recipe : {"amp", "bf16"}) {
      amp::Comparison c = amp::compare(unet, x, loss, amp::recipe(recipe).policy);
      check_healthy(c);
      double worst = 0;
      for (const auto& m : c.modules) worst = std::max(worst, m.grad_error);
      CHECK(worst > 1e-2);  // a single threshold of 0.01 for both named a module here
    }
  }
}

TEST_CASE("compare names gradients an f16 backward flushes to zero", "[amp][compare]") {
  // A loss so small that, unscaled (loss_scale 1), every f16 gradient of an activation is
  // below the smallest subnormal: the weight gradients come back 0, a relative error of 1.
  manual_seed(7);
  test::OverflowNet net(1.0);
  Tensor x = randn({8, 4});
  auto tiny = [](const Tensor& out) { return mul(mse_to_zero(out), 1e-12); };
  amp::Comparison c = amp::compare(net, x, tiny, amp::recipe("amp").policy, {.loss_scale = 1.0});
  INFO(c.table());
  REQUIRE(c.first_exceeding);
  CHECK(c.modules[*c.first_exceeding].grad_error > c.grad_threshold);
  amp::Comparison big = amp::compare(net, x, tiny, amp::recipe("amp").policy, {.loss_scale = 0x1p40});
  CHECK_FALSE(big.first_exceeding);  // scaled far enough, the gradients survive
}

TEST_CASE("compare still names a planted overflow inside an attention model", "[amp][compare]") {
  // GPT with a large attention logit scale: its logits overflow f16 in the first block's
  // attention, which compare() names (the floor does not hide a non-finite gradient).
  manual_seed(4);
  GPT gpt({.vocab_size = 40, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .attn_scale = 1e6});
  Tensor tokens = randint(0, 40, {4, 16}), targets = randint(0, 40, {4, 16});
  auto loss = [&](const Tensor& logits) { return cross_entropy(logits.reshape({64, 40}), targets.reshape({64})); };
  amp::Comparison c = amp::compare(gpt, tokens, loss, amp::recipe("amp").policy);
  INFO(c.table());
  REQUIRE(c.first_exceeding);
  // The softmax is inside the attention, not a module: out_proj's is the first output
  // that is not finite.
  CHECK(c.modules[*c.first_exceeding].module == "blocks.0.attn.out_proj");
  // The OverflowNet's planted layer, as before the floor.
  test::OverflowNet net(1e4);
  Tensor x = randn({8, 4});
  amp::Comparison o = amp::compare(net, x, mse_to_zero, amp::recipe("amp").policy);
  REQUIRE(o.first_exceeding);
  CHECK(o.modules[*o.first_exceeding].module == "big");
}
