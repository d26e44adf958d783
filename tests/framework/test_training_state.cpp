// save_training_state / load_training_state: a run with AdamW, a scheduler, a GradScaler,
// a shuffling DataLoader and dropout resumes bit for bit from one call; wrong section
// lists and a part that refuses its state leave every part unchanged.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <memory>

#include "framework/serialize/training_state.h"
#include "halfgrad.h"
#include "tests/temp_dir.h"

using namespace hg;
using hg::test::TempDir;

namespace {

struct Net : nn::Module {
  HG_CHILD(nn::Linear, fc1, 4, 16);
  HG_CHILD(nn::Dropout, drop, 0.3);
  HG_CHILD(nn::Linear, fc2, 16, 1);
  Tensor forward_impl(const Tensor& x) override { return (*fc2)((*drop)(relu((*fc1)(x)))); }
  std::string type_name() const override { return "Net"; }
};

std::shared_ptr<data::TensorDataset> make_data() {
  Generator g(7);
  Tensor x = randn({40, 4}, {}, &g);
  return std::make_shared<data::TensorDataset>(x, sum(x, {1}, true));
}

// Every part of the run's state lives here; a fresh Run is a fresh process.
struct Run {
  Net net;
  optim::AdamW opt{net.named_parameters(), {.lr = 1e-2}};
  optim::StepLR sched{opt, 4, 0.5};
  // A growth interval of 3 moves the scale on both sides of the checkpoint, and 2^18
  // overflows at first, so skipped steps and back-offs are part of the resumed state.
  amp::GradScaler scaler{{.init_scale = 262144.0, .growth_interval = 3}};
  data::DataLoader loader{make_data(), {.batch_size = 16, .shuffle = true, .seed = 11}};  // 3 batches an epoch

  std::vector<NamedState> parts() {
    return {{"model", net},     {"optimizer", opt},   {"scheduler", sched},
            {"scaler", scaler}, {"rng", default_generator()}, {"loader", loader}};
  }
  void step() {
    std::optional<data::Example> b = loader.next();
    if (!b) b = loader.next();  // the epoch ended: the next call starts a new one
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(net(b->input), b->target);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    sched.step();
    opt.zero_grad();
  }
};

std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to_vector<double>()) out.push_back(std::bit_cast<uint64_t>(v));
  return out;
}

void check_bitwise(const StateDict& got, const StateDict& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, t] : want) {
    INFO(name);
    REQUIRE(got.count(name));
    CHECK(bits(got.at(name)) == bits(t));
  }
}

constexpr int kSave = 5, kEnd = 13;

}  // namespace

TEST_CASE("load_training_state resumes AdamW, scheduler, scaler, loader and dropout bit for bit", "[resume][training_state]") {
  TempDir dir;
  const std::string path = dir / "state.ckpt";
  manual_seed(0);
  Run straight;
  for (int s = 0; s < kSave; ++s) straight.step();
  save_training_state(path, kSave, straight.parts());
  for (int s = kSave; s < kEnd; ++s) straight.step();
  const StateDict rng_end = generator_state(default_generator());

  manual_seed(99);  // elsewhere: only the load can make the two runs meet
  Run resumed;
  REQUIRE(load_training_state(path, resumed.parts()) == kSave);
  for (int s = kSave; s < kEnd; ++s) resumed.step();

  check_bitwise(resumed.net.state_dict(), straight.net.state_dict());
  check_bitwise(resumed.opt.state_dict(), straight.opt.state_dict());
  check_bitwise(resumed.sched.state_dict(), straight.sched.state_dict());
  check_bitwise(resumed.scaler.state_dict(), straight.scaler.state_dict());
  check_bitwise(resumed.loader.state_dict(), straight.loader.state_dict());
  check_bitwise(generator_state(default_generator()), rng_end);

  // Each part matters: the same resume without the generator's state (dropout masks)
  // ends elsewhere.
  Run partial;
  load_training_state(path, partial.parts());
  manual_seed(99);
  for (int s = kSave; s < kEnd; ++s) partial.step();
  CHECK(bits(partial.net.fc1->weight) != bits(straight.net.fc1->weight));
}

TEST_CASE("load_training_state refuses a different list of parts, naming them, and loads nothing", "[resume][training_state]") {
  TempDir dir;
  const std::string path = dir / "state.ckpt";
  manual_seed(0);
  Run a;
  a.step();
  save_training_state(path, 1, a.parts());
  Run b;
  StateDict before;
  for (auto& [k, v] : b.net.state_dict()) before[k] = v.clone();
  std::vector<NamedState> parts = {{"model", b.net}, {"optimizer", b.opt}, {"ema", b.sched}};
  CHECK_THROWS_WITH(load_training_state(path, parts),
                    Catch::Contains("Not in the file: \"ema\"") &&
                        Catch::Contains("not asked for: \"loader\", \"rng\", \"scaler\", \"scheduler\"") &&
                        Catch::Contains("nothing was loaded"));
  check_bitwise(b.net.state_dict(), before);
  CHECK_THROWS_WITH(save_training_state(path, 1, {{"model", b.net}, {"model", b.opt}}),
                    Catch::Contains("\"model\" is named twice"));
  CHECK(load_training_state(path, a.parts()) == 1);  // the refused save left the file as it was
}

TEST_CASE("a part that refuses its state makes load_training_state put back the parts before it", "[resume][training_state]") {
  TempDir dir;
  const std::string path = dir / "state.ckpt";
  manual_seed(0);
  Run a;
  for (int s = 0; s < 4; ++s) a.step();
  save_training_state(path, 4, a.parts());

  manual_seed(5);
  Run b;
  b.step();
  // A loader of another seed refuses the saved position (its batches would differ); it
  // is loaded last, after every other part has taken its state.
  data::DataLoader other(make_data(), {.batch_size = 16, .seed = 12});
  std::vector<NamedState> parts = {{"model", b.net},   {"optimizer", b.opt}, {"scheduler", b.sched},
                                   {"scaler", b.scaler}, {"rng", default_generator()}, {"loader", other}};
  std::vector<StateDict> before;
  for (const auto& p : parts) {
    StateDict copy;
    for (auto& [k, v] : p.state.state_dict()) copy[k] = v.clone();
    before.push_back(copy);
  }
  CHECK_THROWS_WITH(load_training_state(path, parts), Catch::Contains("the part \"loader\" refused its state") &&
                                                          Catch::Contains("seed 11") &&
                                                          Catch::Contains("were put back"));
  for (size_t i = 0; i < parts.size(); ++i) {
    INFO(parts[i].name);
    check_bitwise(parts[i].state.state_dict(), before[i]);
  }
  CHECK(b.opt.param_groups()[0].lr == b.sched.get_last_lr()[0]);
}
