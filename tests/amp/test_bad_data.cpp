// Bad data under loss scaling: a NaN or inf inside one input batch makes the GradScaler
// skip that step and name the parameters whose gradients went non-finite; the weights
// and the optimizer state stay as they were, and the next clean batch trains again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include "halfgrad.h"

using namespace hg;

namespace {

// tanh, not relu: tanh(NaN) is NaN, so a NaN travels to every layer; and tanh(±inf) is
// ±1 exactly, whose derivative 0 times the inf input makes NaN only in fc1.weight.
class Net : public nn::Module {
 public:
  Tensor forward_impl(const Tensor& x) override { return (*fc2)(tanh((*fc1)(x))); }
  std::string type_name() const override { return "Net"; }

  HG_CHILD(nn::Linear, fc1, 4, 8);
  HG_CHILD(nn::Linear, fc2, 8, 2);
};

// One training-mode recipe (amp: f32 weights, f16 autocast; amp-master: f16 weights and
// f32 masters) with Adam and a dynamic loss scaler.
struct Run {
  amp::Recipe rc;
  Net net;
  std::unique_ptr<amp::MasterWeights> mw;
  std::unique_ptr<optim::Adam> opt;
  amp::GradScaler scaler;

  explicit Run(const std::string& mode) : rc(amp::recipe(mode)) {
    if (rc.policy.params != f32) amp::cast_model(net, rc.policy.params, rc.policy.keep_batchnorm_f32);
    if (rc.master_weights) mw = std::make_unique<amp::MasterWeights>(net.named_parameters());
    opt = std::make_unique<optim::Adam>(mw ? mw->params() : net.named_parameters(), optim::AdamOptions{.lr = 0.01});
  }

  amp::StepResult step(const Tensor& x, const Tensor& y) {
    Tensor loss;
    {
      std::optional<amp::Autocast> ac;
      if (rc.autocast) ac.emplace(*rc.autocast);
      loss = mse_loss(net(x.to(rc.policy.params)).to(f32), y);
    }
    scaler.scale(loss).backward();
    if (mw) mw->copy_grads_to_master();
    scaler.unscale_(*opt);
    std::vector<Tensor> params;
    for (const auto& [n, p] : opt->named_parameters()) params.push_back(p);
    optim::clip_grad_norm_(params, 1.0);
    amp::StepResult r = scaler.step(*opt);
    scaler.update();
    if (mw) mw->copy_master_to_model();
    opt->zero_grad();
    net.zero_grad();
    return r;
  }

  // Everything a skipped step must leave alone: model weights, master weights, Adam's
  // moments and step counts. Values as bits, so -0 vs +0 or a NaN would show.
  std::map<std::string, std::vector<uint64_t>> snapshot() const {
    std::map<std::string, std::vector<uint64_t>> s;
    auto add = [&](const std::string& key, const Tensor& t) {
      auto& bits = s[key];
      for (double v : t.to_vector<double>()) bits.push_back(std::bit_cast<uint64_t>(v));
    };
    for (const auto& [n, t] : net.state_dict()) add("model/" + n, t);
    for (const auto& [n, t] : opt->named_parameters()) add("master/" + n, t);
    for (const auto& [n, t] : opt->state_dict()) add("optimizer/" + n, t);
    return s;
  }

  bool weights_finite() const {
    for (const auto& [n, t] : opt->named_parameters())
      for (double v : t.to_vector<double>())
        if (!std::isfinite(v)) return false;
    for (const auto& [n, t] : net.named_parameters())
      for (double v : t.to_vector<double>())
        if (!std::isfinite(v)) return false;
    return true;
  }
};

Tensor poisoned(const Tensor& x, double value) {
  std::vector<double> v = x.to_vector<double>();
  v[0] = value;  // one bad element in the first sample
  return from_vector(v, x.shape());
}

using Named = std::vector<std::pair<std::string, int64_t>>;  // sorted by name

void check_bad_batch_is_skipped(const std::string& mode, double bad, const Named& expect_named) {
  INFO("mode " << mode << ", bad value " << bad);
  manual_seed(1);
  Run run(mode);
  Generator g(11);
  auto batch = [&] { return std::pair{randn({16, 4}, {f32}, &g), randn({16, 2}, {f32}, &g)}; };

  auto [x0, y0] = batch();
  REQUIRE_FALSE(run.step(x0, y0).skipped());
  const double scale = run.scaler.get_scale();
  const auto before = run.snapshot();

  auto [x1, y1] = batch();
  const amp::StepResult r = run.step(poisoned(x1, bad), y1);
  CHECK(r.skipped());
  Named named = r.nonfinite();
  std::sort(named.begin(), named.end());
  CHECK(named == expect_named);
  CHECK(run.snapshot() == before);
  CHECK(run.weights_finite());
  CHECK(run.scaler.get_scale() == scale * 0.5);  // backoff_factor

  auto [x2, y2] = batch();
  const amp::StepResult next = run.step(x2, y2);
  CHECK_FALSE(next.skipped());
  CHECK(next.nonfinite().empty());
  CHECK(run.snapshot() != before);
  CHECK(run.weights_finite());
}

}  // namespace

TEST_CASE("a NaN in an input batch: the amp step is skipped and every parameter is named", "[amp][bad_data]") {
  // The NaN reaches every activation of its sample, so every gradient element sums a NaN.
  const Named all = {{"fc1.bias", 8}, {"fc1.weight", 32}, {"fc2.bias", 2}, {"fc2.weight", 16}};
  for (const std::string mode : {"amp", "amp-master"})
    check_bad_batch_is_skipped(mode, std::numeric_limits<double>::quiet_NaN(), all);
}

TEST_CASE("an inf in an input batch: the step is skipped and only the layer it poisons is named",
          "[amp][bad_data]") {
  // tanh saturates to ±1, so only fc1.weight's gradient column of the inf input gets
  // 0 * inf = NaN: one element per output unit of fc1.
  for (const std::string mode : {"amp", "amp-master"})
    for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()})
      check_bad_batch_is_skipped(mode, bad, {{"fc1.weight", 8}});
}

TEST_CASE("a NaN batch leaves BatchNorm's running statistics of its channel as they were", "[amp][bad_data]") {
  manual_seed(2);
  nn::BatchNorm2d bn(3);
  amp::Autocast ac(f16);
  bn(randn({4, 5, 5, 3}).to(f16));
  const std::vector<double> mean0 = bn.running_mean.to_vector<double>(), var0 = bn.running_var.to_vector<double>();
  // NHWC: element 0 is in channel 0, so only channel 0's batch statistics are NaN.
  bn(poisoned(randn({4, 5, 5, 3}), std::numeric_limits<double>::quiet_NaN()).to(f16));
  const std::vector<double> mean1 = bn.running_mean.to_vector<double>(), var1 = bn.running_var.to_vector<double>();
  CHECK(mean1[0] == mean0[0]);
  CHECK(var1[0] == var0[0]);
  for (size_t c = 1; c < 3; ++c) {
    INFO("channel " << c);
    CHECK(std::isfinite(mean1[c]));
    CHECK(mean1[c] != mean0[c]);
    CHECK(var1[c] != var0[c]);
  }
}
