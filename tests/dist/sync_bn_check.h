// The SyncBatchNorm check shared by the MPI and nccl tests: a model with batch norm trains
// on 2 ranks x batch B, on `device`, like one process on the CPU with plain BatchNorm2d on
// batch 2B (weights and running statistics), and evaluates alike with the running statistics.
#pragma once
#include <catch2/catch.hpp>

#include "dist_models.h"
#include "dist/ddp.h"
#include "dist/sync_batch_norm.h"

namespace hg::dist_test {

// NHWC [N, 2, 2, 4] -> batch norm -> flatten -> Linear(16, 2).
template <class BN>
struct BnNet : nn::Module {
  HG_CHILD(nn::Linear, pre, 4, 4);
  HG_CHILD(BN, bn, 4);
  HG_CHILD(nn::Linear, fc, 16, 2);
  Tensor forward_impl(const Tensor& x) override {
    return (*fc)((*bn)((*pre)(x)).reshape({x.size(0), 16}));
  }
  std::string type_name() const override { return "BnNet"; }
};

// DDP and SyncBatchNorm get no group: both follow the device (MPI on the CPU, nccl on a GPU).
inline void check_sync_bn_trains_like_one_process(const Device& device) {
  dist::ProcessGroup& pg = *dist::default_group();
  const int world = pg.size(), rank = pg.rank(), B = 3, steps = 4;
  Generator g(21);
  // Channel scales differ so that per-rank statistics would differ visibly from global ones.
  Tensor X = randn({steps * world * B, 2, 2, 4}, {f32}, &g) * 3.0 + 1.0;
  Tensor Y = randn({steps * world * B, 2}, {f32}, &g);
  manual_seed(8);
  BnNet<nn::BatchNorm2d> ref;
  manual_seed(8);
  BnNet<dist::SyncBatchNorm> mine;
  mine.to(device);
  dist::DistributedDataParallel ddp(mine);
  optim::SGD opt_ref(ref.named_parameters(), optim::SGDOptions{.lr = 0.1});
  optim::SGD opt(mine.named_parameters(), optim::SGDOptions{.lr = 0.1});
  for (int k = 0; k < steps; ++k) {
    Tensor x = X.narrow(0, k * world * B, world * B), y = Y.narrow(0, k * world * B, world * B);
    mse_loss(ref(x), y).backward();
    opt_ref.step();
    opt_ref.zero_grad();
    mse_loss(ddp(x.narrow(0, rank * B, B).to(device)), y.narrow(0, rank * B, B).to(device)).backward();
    opt.step();
    opt.zero_grad();
    CHECK(same_on_all_ranks(pg, mine));
  }
  CHECK(max_rel_diff(mine, ref) < 1e-5);
  auto buffer = [](nn::Module& bn, const std::string& name) {
    for (auto& [n, t] : bn.named_buffers())
      if (n == name) return t.to_vector<double>();
    return std::vector<double>{};
  };
  for (const char* buf : {"running_mean", "running_var"}) {
    INFO(buf);
    std::vector<double> a = buffer(*mine.bn, buf), b = buffer(*ref.bn, buf);
    REQUIRE((a.size() == 4 && b.size() == 4));
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-5));
  }
  // Evaluation uses the running statistics, which every rank holds alike: same output.
  mine.eval();
  ref.eval();
  Tensor xe = X.narrow(0, 0, 2);
  std::vector<double> ye = mine(xe.to(device)).to_vector<double>(), yr = ref(xe).to_vector<double>();
  for (size_t i = 0; i < ye.size(); ++i) CHECK(ye[i] == Approx(yr[i]).epsilon(1e-4));
}

}  // namespace hg::dist_test
