// O2 master weights in checkpoints: state_dict()/load_state_dict() round trips and their
// checks, and an O2 run resumed from a checkpoint that ends bit for bit where the run
// straight through ends (without the masters it drifts: they were rounded to f16).
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <memory>

#include "halfgrad.h"
#include "tests/temp_dir.h"

using namespace hg;
using hg::test::TempDir;

namespace {

class Net : public nn::Module {
 public:
  Tensor forward_impl(const Tensor& x) override { return (*fc)(mean(relu((*bn)((*conv)(x))), {1, 2})); }
  std::string type_name() const override { return "Net"; }

  HG_CHILD(nn::Conv2d, conv, 3, 8, 3, Conv2dOptions{.padding = {1, 1}});
  HG_CHILD(nn::BatchNorm2d, bn, 8);
  HG_CHILD(nn::Linear, fc, 8, 2);
};

// The amp-master (O2) loop of segbench: f16 model (BatchNorm f32), f32 masters in Adam,
// dynamic loss scaling. Batch `step` comes from its own seed, so a resumed run sees the
// batches the straight run saw.
struct O2Trainer {
  struct Seed {  // seeds the default generator before `net` draws its initial weights
    explicit Seed(uint64_t s) { manual_seed(s); }
  } seed;
  Net net;
  std::unique_ptr<amp::MasterWeights> mw;
  std::unique_ptr<optim::Adam> opt;
  amp::GradScaler scaler{amp::GradScalerOptions{.init_scale = 1024.0, .growth_interval = 3}};

  explicit O2Trainer(uint64_t s) : seed(s) {
    amp::cast_model(net, f16, true);
    mw = std::make_unique<amp::MasterWeights>(net.named_parameters());
    opt = std::make_unique<optim::Adam>(mw->params(), optim::AdamOptions{.lr = 3e-3});
  }

  void step(int64_t index) {
    Generator g(1000 + static_cast<uint64_t>(index));
    Tensor x = randn({4, 5, 5, 3}, {f32}, &g).to(f16), y = randn({4, 2}, {f32}, &g);
    Tensor loss = mse_loss(net(x).to(f32), y);
    scaler.scale(loss).backward();
    mw->copy_grads_to_master();
    scaler.unscale_(*opt);
    std::vector<Tensor> masters;
    for (auto& [n, p] : mw->params()) masters.push_back(p);
    optim::clip_grad_norm_(masters, 1.0);
    scaler.step(*opt);
    scaler.update();
    mw->copy_master_to_model();
    opt->zero_grad();
  }

  Checkpoint checkpoint(bool with_masters) const {
    Checkpoint ck;
    ck.sections = {{"model", net.state_dict()}, {"optimizer", opt->state_dict()}, {"scaler", scaler.state_dict()}};
    if (with_masters) ck.sections["master"] = mw->state_dict();
    return ck;
  }

  void restore(const Checkpoint& ck) {
    net.load_state_dict(ck.sections.at("model"));
    opt->load_state_dict(ck.sections.at("optimizer"));
    scaler.load_state_dict(ck.sections.at("scaler"));
    if (ck.sections.count("master")) mw->load_state_dict(ck.sections.at("master"));
  }

  // Every number the run carries forward, as bit patterns.
  std::map<std::string, std::vector<uint64_t>> state_bits() const {
    std::map<std::string, std::vector<uint64_t>> out;
    for (const auto& [section, sd] : checkpoint(true).sections)
      for (const auto& [name, t] : sd)
        for (double v : t.to_vector<double>()) out[section + "/" + name].push_back(std::bit_cast<uint64_t>(v));
    return out;
  }
};

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("an O2 run resumed from a checkpoint ends bit-identical to the run straight through", "[master][resume]") {
  constexpr int kFirst = 8, kMore = 8;
  TempDir dir;
  O2Trainer straight(7);
  for (int s = 0; s < kFirst; ++s) straight.step(s);
  save_checkpoint(dir / "with.safetensors", straight.checkpoint(true));
  save_checkpoint(dir / "without.safetensors", straight.checkpoint(false));
  for (int s = kFirst; s < kFirst + kMore; ++s) straight.step(s);

  O2Trainer resumed(99);  // other initial weights: only the load can make them equal
  resumed.restore(load_checkpoint(dir / "with.safetensors"));
  for (int s = kFirst; s < kFirst + kMore; ++s) resumed.step(s);
  CHECK(resumed.state_bits() == straight.state_bits());

  // The regression: without the masters a resumed run can only rebuild them from the
  // model's f16 weights (as a new MasterWeights would), and its weights drift.
  O2Trainer drifted(99);
  drifted.restore(load_checkpoint(dir / "without.safetensors"));
  StateDict rounded;
  for (auto& [name, p] : drifted.net.named_parameters())
    if (p.dtype() == f16) rounded[name] = p.detach().to(f32);
  drifted.mw->load_state_dict(rounded);
  for (int s = kFirst; s < kFirst + kMore; ++s) drifted.step(s);
  double drift = 0;
  for (size_t i = 0; i < straight.mw->params().size(); ++i)
    drift = std::max(drift, max_abs_diff(drifted.mw->params()[i].second, straight.mw->params()[i].second));
  CHECK(drift > 0);
}

TEST_CASE("MasterWeights state dict: only reduced-precision parameters, checked before loading", "[master][state]") {
  Tensor w16 = tensor({1.0, 2.0}, {f16}).set_requires_grad().set_name("w");
  Tensor b32 = tensor({0.5}).set_requires_grad().set_name("b");
  amp::MasterWeights mw({{"w", w16}, {"b", b32}});
  const StateDict sd = mw.state_dict();
  REQUIRE(sd.size() == 1);  // b is its own master and lives in the model's state
  CHECK(sd.at("w").dtype() == f32);

  // A master that is no f16 value comes back exactly, and the model gets it rounded once.
  StateDict next{{"w", tensor({1.0 + 0x1p-12, -3.0})}};
  mw.load_state_dict(next);
  CHECK(mw.params()[0].second.to_vector<double>() == std::vector<double>{1.0 + 0x1p-12, -3.0});
  CHECK(w16.to_vector<double>() == std::vector<double>{1.0, -3.0});  // 2^-12 is below half an f16 ulp at 1

  const std::vector<double> kept = mw.params()[0].second.to_vector<double>();
  CHECK_THROWS_WITH(mw.load_state_dict({}), Catch::Contains("'w' is missing") && Catch::Contains("nothing was loaded"));
  CHECK_THROWS_WITH(mw.load_state_dict({{"w", tensor({1.0, 2.0, 3.0})}}), Catch::Contains("expected f32 [2]"));
  CHECK_THROWS_WITH(mw.load_state_dict({{"w", tensor({1.0, 2.0}, {f16})}}), Catch::Contains("'w' is f16"));
  CHECK_THROWS_WITH(mw.load_state_dict({{"w", tensor({1.0, 2.0})}, {"v", tensor({1.0})}}),
                    Catch::Contains("'v' is not a parameter"));
  CHECK_THROWS_WITH(mw.load_state_dict({{"w", tensor({1.0, 2.0})}, {"b", tensor({1.0})}}),
                    Catch::Contains("their own masters"));
  CHECK(mw.params()[0].second.to_vector<double>() == kept);
  CHECK(b32.to_vector<double>() == std::vector<double>{0.5});
}
