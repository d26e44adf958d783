// The small GPT: parameter names and the tied head, causality of the whole model, a
// short fp32 training run that learns a repeating sequence, amp against fp32 on it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "halfgrad.h"
#include "tests/devices.h"

using namespace hg;

namespace {

GPTConfig tiny() { return {.vocab_size = 7, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16}; }

// Tokens 0 1 2 3 4 5 6 0 1 2 ... from several offsets: the next token is fully predictable.
data::Example cyclic_batch() {
  std::vector<double> in, out;
  for (int b = 0; b < 7; ++b)
    for (int t = 0; t < 8; ++t) {
      in.push_back((b + t) % 7);
      out.push_back((b + t + 1) % 7);
    }
  return {from_vector(in, {7, 8}, {i64}), from_vector(out, {7, 8}, {i64})};
}

double train(DType autocast_dtype, int steps) {
  manual_seed(3);
  GPT model(tiny());
  optim::Adam opt(model.named_parameters(), {.lr = 1e-2});
  amp::GradScaler scaler({.enabled = autocast_dtype == f16});
  const data::Example b = cyclic_batch();
  double last = 0;
  for (int s = 0; s < steps; ++s) {
    Tensor loss;
    {
      std::optional<amp::Autocast> ac;
      if (autocast_dtype != f32) ac.emplace(autocast_dtype);
      loss = cross_entropy(model(b.input).to(f32), b.target);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    last = loss.item<double>();
  }
  return last;
}

}  // namespace

TEST_CASE("GPT has the parameters of its diagram and a tied head", "[gpt]") {
  manual_seed(1);
  GPT model(tiny());
  std::vector<std::string> names;
  for (auto& [n, p] : model.named_parameters()) names.push_back(n);
  CHECK(names.front() == "wte.weight");
  CHECK(names[1] == "wpe.weight");
  CHECK(std::find(names.begin(), names.end(), "blocks.1.attn.q_proj.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "blocks.0.mlp.0.weight") != names.end());
  CHECK(names.back() == "ln_f.bias");
  // No separate head weight: logits are ln_f(x) · wteᵀ.
  CHECK(std::none_of(names.begin(), names.end(), [](const std::string& n) { return n.find("head") != std::string::npos; }));
  // 7*16 + 8*16 + 2 * (4 LayerNorm/attn blocks) ... counted by hand:
  // per block: 2 LN (2*32) + attn 4*(16*16+16) + mlp 16*64+64 + 64*16+16 = 64 + 1088 + 2128 = 3280
  CHECK(model.parameter_count() == 7 * 16 + 8 * 16 + 2 * 3280 + 32);
  CHECK_THROWS_WITH(model(zeros({1, 9}, {i64})), Catch::Contains("length <= 8"));
  CHECK_THROWS_WITH(model(zeros({1, 4})), Catch::Contains("expected i64 tokens"));
}

TEST_CASE("GPT is causal: a later token never changes earlier logits", "[gpt]") {
  manual_seed(2);
  GPT model(tiny());
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {i64}).view({1, 6});
  Tensor b = tensor({1, 2, 3, 4, 0, 0}, {i64}).view({1, 6});
  Tensor la = model(a), lb = model(b);
  CHECK(la.shape() == Shape{1, 6, 7});
  CHECK(allclose(la.narrow(1, 0, 4), lb.narrow(1, 0, 4), 1e-6, 1e-7));
  CHECK_FALSE(allclose(la.narrow(1, 4, 1), lb.narrow(1, 4, 1)));
}

TEST_CASE("GPT learns a cyclic sequence in fp32, amp and bf16 alike", "[gpt][amp]") {
  const double fp32 = train(f32, 60), amp = train(f16, 60), bf = train(bf16, 60);
  INFO("final losses: fp32 " << fp32 << ", amp " << amp << ", bf16 " << bf);
  CHECK(fp32 < 0.1 * std::log(7.0));  // from ln 7 = 1.95 at the start
  CHECK(std::abs(amp - fp32) < 0.05);
  CHECK(std::abs(bf - fp32) < 0.1);
}

TEST_CASE("fp32 GPT training follows f64 step by step", "[gpt]") {
  // A guard for fp32-only bugs (a kernel, a mask, the optimizer on f32 parameters): the
  // same 20 Adam steps in f64 are the reference; fp32 rounding moves the loss by < 1e-6 here.
  const data::Example b = cyclic_batch();
  std::vector<double> losses[2];
  for (int k = 0; k < 2; ++k) {
    manual_seed(3);
    GPT model(tiny());
    if (k) model.to(f64);
    optim::Adam opt(model.named_parameters(), {.lr = 1e-2});
    for (int s = 0; s < 20; ++s) {
      Tensor loss = cross_entropy(model(b.input), b.target);
      loss.backward();
      opt.step();
      opt.zero_grad();
      losses[k].push_back(loss.item<double>());
    }
  }
  CHECK(losses[1].back() < 0.5 * losses[1].front());
  for (size_t s = 0; s < losses[0].size(); ++s) CHECK(losses[0][s] == Approx(losses[1][s]).margin(1e-5));
}

TEST_CASE("GPT trains on cuda:0 as on the CPU", "[gpt][cuda]") {
  HG_REQUIRE_CUDA();
  const data::Example b = cyclic_batch();
  std::vector<double> losses[2];
  for (int k = 0; k < 2; ++k) {
    const Device d = k ? Device::cuda(0) : Device::cpu();
    manual_seed(3);
    GPT model(tiny());
    model.to(d);
    optim::Adam opt(model.named_parameters(), {.lr = 1e-2});
    for (int s = 0; s < 5; ++s) {
      Tensor loss = cross_entropy(model(b.input.to(d)), b.target.to(d));
      loss.backward();
      opt.step();
      opt.zero_grad();
      losses[k].push_back(loss.item<double>());
    }
  }
  INFO("cpu " << losses[0].front() << " -> " << losses[0].back() << ", cuda " << losses[1].front() << " -> "
              << losses[1].back());
  CHECK(losses[1].back() < 0.9 * losses[1].front());
  for (size_t s = 0; s < losses[0].size(); ++s) CHECK(losses[1][s] == Approx(losses[0][s]).margin(1e-4));
}

TEST_CASE("DetectAnomaly is silent on a healthy GPT and names the attention layer of a hostile one", "[gpt][amp][anomaly]") {
  const data::Example b = cyclic_batch();
  manual_seed(4);
  GPT healthy(tiny());
  {
    amp::DetectAnomaly guard;
    amp::Autocast ac(f16);
    Tensor loss = cross_entropy(healthy(b.input).to(f32), b.target);
    loss.backward();  // the causal mask puts no inf in the graph
    CHECK(std::isfinite(loss.item<double>()));
  }
  GPTConfig c = tiny();
  c.attn_scale = 1e6;  // scaled queries exceed the f16 maximum
  manual_seed(4);
  GPT hostile(c);
  amp::DetectAnomaly guard;
  amp::Autocast ac(f16);
  CHECK_THROWS_WITH(hostile(b.input), Catch::Contains("in blocks.0.attn produced") && Catch::Contains("inf in f16"));
}
