// The loss scaler across ranks (only ONE rank sees an overflowing batch: both must skip
// that step and keep identical scales), and checkpoints written by rank 0 that every
// rank resumes from.
#include <catch2/catch.hpp>

#include <filesystem>
#include <optional>

#include <unistd.h>

#include "dist_models.h"
#include "dist/amp_sync.h"
#include "dist/ddp.h"

using namespace hg;
using namespace hg::dist_test;

namespace {

struct Trajectory {
  std::vector<double> scales;  // after each update()
  std::vector<bool> skipped;
};

// Every rank trains its own replica on the same data (no gradient averaging, so nothing
// but the scaler's agreement can make rank 0 skip), except that rank 1's batch of step 2
// overflows f16. growth_interval 2, init 1024.
Trajectory train_with_one_overflow(bool agree, nn::Module& m) {
  dist::ProcessGroup& pg = *dist::default_group();
  Generator g(3);
  Tensor X = randn({5, 4, 8}, {f32}, &g), Y = randn({5, 4, 2}, {f32}, &g);
  optim::SGD opt(m.named_parameters(), optim::SGDOptions{.lr = 0.05});
  amp::GradScalerOptions so;
  so.init_scale = 1024;
  so.growth_interval = 2;
  amp::GradScaler scaler(so);
  if (agree) dist::agree_on_overflow(scaler);
  Trajectory t;
  for (int k = 0; k < 5; ++k) {
    Tensor x = X.select(0, k);
    if (k == 2 && pg.rank() == 1) x = x * 1e6;  // 1e6 > 65504: f16 inf in the forward
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(m(x).to(f32), Y.select(0, k));
    }
    scaler.scale(loss).backward();
    t.skipped.push_back(scaler.step(opt).skipped());
    scaler.update();
    t.scales.push_back(scaler.get_scale());
    opt.zero_grad();
  }
  return t;
}

}  // namespace

TEST_CASE("found_inf agreement: one rank overflows; every rank skips that step and keeps the same scale", "[dist]") {
  dist::ProcessGroup& pg = *dist::default_group();
  auto m = make_mlp(9);
  Trajectory t = train_with_one_overflow(true, *m);
  // PyTorch's rule by hand: grow x2 after 2 good steps, halve on the overflow.
  CHECK(t.skipped == std::vector<bool>{false, false, true, false, false});
  CHECK(t.scales == std::vector<double>{1024, 2048, 1024, 1024, 2048});
  CHECK(same_on_all_ranks(pg, *m));  // rank 0 skipped the same step, so the replicas still agree
}

TEST_CASE("found_inf agreement control: without it rank 0 steps through the overflow and the replicas drift", "[dist]") {
  dist::ProcessGroup& pg = *dist::default_group();
  auto m = make_mlp(9);
  Trajectory t = train_with_one_overflow(false, *m);
  CHECK(t.skipped[2] == (pg.rank() == 1));
  CHECK_FALSE(same_on_all_ranks(pg, *m));
}

TEST_CASE("checkpoint: rank 0 writes; every rank resumes the same model and its shard of the data", "[dist]") {
  dist::ProcessGroup& pg = *dist::default_group();
  // One folder for both ranks: rank 0 makes its name and broadcasts it.
  Tensor stamp = from_data<int64_t>({static_cast<int64_t>(::getpid())}, {1});
  pg.broadcast(stamp, 0);
  const std::string dir = "/tmp/hg-dist-ckpt-" + std::to_string(stamp.item<int64_t>());
  auto m = make_mlp(4 + static_cast<uint64_t>(pg.rank()));
  dist::DistributedDataParallel ddp(*m, dist::default_group());
  auto ds = std::make_shared<data::TensorDataset>(arange(0, 40, 1, {f32}).reshape({40, 1}), arange(0, 40, 1, {i64}));
  data::DataLoaderOptions lo{.batch_size = 3, .seed = 8, .num_shards = pg.size(), .shard = pg.rank()};
  data::DataLoader loader(ds, lo);
  loader.next();
  loader.next();
  if (pg.rank() == 0) {
    std::filesystem::create_directories(dir);
    Checkpoint c;
    c.sections["model"] = m->state_dict();
    c.sections["loader"] = loader.state_dict();
    save_checkpoint(dir + "/ckpt.safetensors", c);
  }
  pg.barrier();
  auto fresh = make_mlp(77);
  Checkpoint c = load_checkpoint(dir + "/ckpt.safetensors");
  fresh->load_state_dict(c.sections["model"]);
  data::DataLoader resumed(ds, lo);
  resumed.load_state_dict(c.sections["loader"]);
  CHECK(checksum(*fresh) == checksum(*m));
  // The resumed loader draws this rank's third batch: what the original draws next.
  CHECK(resumed.next()->target.to_vector<int64_t>() == loader.next()->target.to_vector<int64_t>());
  pg.barrier();
  if (pg.rank() == 0) std::filesystem::remove_all(dir);
}
