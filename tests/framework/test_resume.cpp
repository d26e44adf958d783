// Exact resume: 20 amp training steps straight, and 10 steps + checkpoint + everything
// rebuilt from scratch + 10 steps, end bit for bit equal (weights, BatchNorm buffers,
// optimizer, scheduler, scaler, generator); a truncated checkpoint changes nothing.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "halfgrad.h"
#include "tests/temp_dir.h"

using namespace hg;
using hg::test::TempDir;

namespace {

// Each kind of state a resume must carry: BatchNorm's running statistics and i64 batch
// counter, and Dropout's draws from the default generator.
class Net : public nn::Module {
 public:
  Tensor forward_impl(const Tensor& x) override { return (*fc)(mean((*drop)(relu((*bn)((*conv)(x)))), {1, 2})); }
  std::string type_name() const override { return "Net"; }

  HG_CHILD(nn::Conv2d, conv, 3, 8, 3, Conv2dOptions{.padding = {1, 1}});
  HG_CHILD(nn::BatchNorm2d, bn, 8);
  HG_CHILD(nn::Dropout, drop, 0.25);
  HG_CHILD(nn::Linear, fc, 8, 2);
};

constexpr int kSteps = 20;

// The amp (O1) loop. An initial scale of 2^18 overflows f16 gradients and a growth
// interval of 3 grows it back, so both halves skip steps and move the scale; the warmup
// and eta_min give the scheduler state beyond its epoch.
struct Trainer {
  Net net;
  optim::Adam opt{net.named_parameters(), optim::AdamOptions{.lr = 0.01}};
  optim::CosineAnnealingLR sched{opt, kSteps, 1e-4, 3};
  amp::GradScaler scaler{amp::GradScalerOptions{.init_scale = 262144.0, .growth_interval = 3}};
  int skipped = 0;

  void step() {
    Tensor x = randn({8, 6, 6, 3}), y = randn({8, 2});
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(net(x), y);
    }
    scaler.scale(loss).backward();
    scaler.unscale_(opt);
    optim::clip_grad_norm_(net.parameters(), 1.0);
    skipped += scaler.step(opt).skipped();
    scaler.update();
    sched.step();
    opt.zero_grad();
  }

  Checkpoint checkpoint(int64_t step) const {
    Checkpoint ck;
    ck.sections = {{"model", net.state_dict()},
                   {"optimizer", opt.state_dict()},
                   {"scheduler", sched.state_dict()},
                   {"scaler", scaler.state_dict()},
                   {"rng", generator_state(default_generator())}};
    ck.step = step;
    return ck;
  }

  // The scheduler was built before the optimizer's state is loaded here, as it must be:
  // built after, it would take the loaded lr for its base lr and overwrite the group lrs,
  // which its own load_state_dict does not set back.
  void restore(const Checkpoint& ck) {
    net.load_state_dict(ck.sections.at("model"));
    opt.load_state_dict(ck.sections.at("optimizer"));
    sched.load_state_dict(ck.sections.at("scheduler"));
    scaler.load_state_dict(ck.sections.at("scaler"));
    set_generator_state(default_generator(), ck.sections.at("rng"));
  }
};

// f32, f64 and i64 values all widen to double exactly; comparing the doubles' bits also
// tells -0 from +0 and NaN payloads apart, which == would not.
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
    CHECK(got.at(name).dtype() == t.dtype());
    CHECK(got.at(name).shape() == t.shape());
    CHECK(bits(got.at(name)) == bits(t));
  }
}

}  // namespace

TEST_CASE("training resumed from a checkpoint ends bitwise equal to training straight through", "[resume]") {
  TempDir dir;
  Checkpoint straight;
  {
    manual_seed(0);
    Trainer t;
    for (int s = 0; s < kSteps; ++s) t.step();
    straight = t.checkpoint(kSteps);
  }

  {
    manual_seed(0);
    Trainer t;
    for (int s = 0; s < kSteps / 2; ++s) t.step();
    REQUIRE(t.skipped > 0);
    save_checkpoint(dir / "ck.safetensors", t.checkpoint(kSteps / 2));
  }
  // A different seed: the rebuilt model starts elsewhere, so only the load can make it equal.
  manual_seed(12345);
  Trainer resumed;
  const Checkpoint ck = load_checkpoint(dir / "ck.safetensors");
  REQUIRE(ck.step == kSteps / 2);
  resumed.restore(ck);
  for (int s = kSteps / 2; s < kSteps; ++s) resumed.step();
  // Overflows and growth on both sides of the checkpoint: the scaler's state matters.
  CHECK(resumed.skipped > 0);
  CHECK(resumed.skipped < kSteps / 2);

  const Checkpoint end = resumed.checkpoint(kSteps);
  REQUIRE(end.sections.size() == straight.sections.size());
  for (const auto& [section, state] : straight.sections) {
    INFO("section " << section);
    check_bitwise(end.sections.at(section), state);
  }
}

TEST_CASE("a truncated checkpoint is refused and leaves a fresh model unchanged", "[resume][errors]") {
  TempDir dir;
  const std::string path = dir / "ck.safetensors";
  manual_seed(0);
  {
    Trainer t;
    t.step();
    save_checkpoint(path, t.checkpoint(1));
  }
  const uintmax_t full_size = std::filesystem::file_size(path);
  uint64_t header = 0;  // safetensors: a little-endian u64 header length, the JSON header, the data
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(&header), sizeof header);
  REQUIRE(8 + header < full_size);
  manual_seed(1);
  Trainer fresh;
  StateDict before;
  for (const auto& [name, t] : fresh.net.state_dict()) before[name] = t.clone();
  // Cut off the last byte, then inside the data, the JSON header and the length prefix
  // (shrinking each time: growing the file would pad it with zeros).
  for (uintmax_t size : {full_size - 1, (8 + header + full_size) / 2, 8 + header / 2, uintmax_t{5}}) {
    INFO("truncated to " << size << " of " << full_size << " bytes");
    std::filesystem::resize_file(path, size);
    CHECK_THROWS_AS(fresh.restore(load_checkpoint(path)), Error);
    check_bitwise(fresh.net.state_dict(), before);
  }
}
