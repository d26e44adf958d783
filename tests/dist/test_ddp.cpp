// DistributedDataParallel under mpirun -np 2: two ranks with batch B train to the same
// weights as one process with batch 2B (fp32, amp; global-norm clipping), parameters stay
// bit-identical on both ranks after every step, gradient buckets and compression.
#include <catch2/catch.hpp>

#include <optional>

#include "dist_models.h"
#include "dist/amp_sync.h"
#include "dist/ddp.h"

using namespace hg;
using namespace hg::dist_test;

namespace {

struct Case {
  bool amp = false;
  double bucket_mb = 25;
  std::optional<DType> compress;
  double clip = 0;  // max global norm; 0: no clipping
};

// Trains a reference model on the whole global batch in this process and a DDP replica on
// this rank's half; returns the worst relative parameter difference after `steps` steps.
double train_both(const Case& c, int steps, const int B = 6) {
  dist::ProcessGroup& pg = *dist::default_group();
  const int world = pg.size(), rank = pg.rank();
  Generator g(11);
  Tensor X = randn({steps * world * B, 8}, {f32}, &g), Y = randn({steps * world * B, 2}, {f32}, &g);
  auto ref = make_mlp(5);
  auto mine = make_mlp(5 + 100 * static_cast<uint64_t>(rank));  // replicas start apart: DDP must broadcast
  dist::DdpOptions o;
  o.bucket_mb = c.bucket_mb;
  o.compress = c.compress;
  dist::DistributedDataParallel ddp(*mine, dist::default_group(), o);
  CHECK(same_on_all_ranks(pg, *mine));
  optim::SGD opt_ref(ref->named_parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  optim::SGD opt(mine->named_parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  amp::GradScalerOptions so;
  so.enabled = c.amp;
  so.init_scale = 1024;
  amp::GradScaler scaler_ref(so), scaler(so);
  dist::agree_on_overflow(scaler);
  auto step = [&](nn::Module& m, auto&& fwd, amp::GradScaler& s, optim::SGD& op, const Tensor& x, const Tensor& y) {
    Tensor loss;
    {
      std::optional<amp::Autocast> ac;
      if (c.amp) ac.emplace(f16);
      loss = mse_loss(fwd(x).to(f32), y);
    }
    s.scale(loss).backward();
    s.unscale_(op);
    if (c.clip > 0) optim::clip_grad_norm_(m.parameters(), c.clip);
    s.step(op);
    s.update();
    op.zero_grad();
  };
  for (int k = 0; k < steps; ++k) {
    Tensor x = X.narrow(0, k * world * B, world * B), y = Y.narrow(0, k * world * B, world * B);
    step(*ref, [&](const Tensor& t) { return (*ref)(t); }, scaler_ref, opt_ref, x, y);
    step(*mine, [&](const Tensor& t) { return ddp(t); }, scaler, opt, x.narrow(0, rank * B, B), y.narrow(0, rank * B, B));
    INFO("step " << k);
    CHECK(same_on_all_ranks(pg, *mine));
  }
  return max_rel_diff(*mine, *ref);
}

}  // namespace

TEST_CASE("DDP fp32: 2 ranks x batch 6 == 1 process x batch 12 after 4 steps; bit-identical replicas", "[dist]") {
  CHECK(train_both({.amp = false, .bucket_mb = 25, .compress = std::nullopt, .clip = 0}, 4) < 1e-5);
}

TEST_CASE("DDP fp32 with small buckets (several all-reduces in flight) and global-norm clipping", "[dist]") {
  // Clipping at 0.05 is active on every step: the norm must be the one of the averaged
  // gradients, as in the single process, or the weights differ by far more than 1e-5.
  CHECK(train_both({.amp = false, .bucket_mb = 0.001, .compress = std::nullopt, .clip = 0.05}, 4) < 1e-5);
}

TEST_CASE("DDP amp (autocast f16 + GradScaler agreed across ranks) matches the single process", "[dist]") {
  // f16 rounds the weight gradients of each half batch instead of the whole batch: the
  // tolerance is f16's, not f32's.
  CHECK(train_both({.amp = true, .bucket_mb = 0.001, .compress = std::nullopt, .clip = 0}, 4) < 3e-3);
}

TEST_CASE("DDP f16 gradient compression stays within f16 rounding of the exact average", "[dist]") {
  CHECK(train_both({.amp = false, .bucket_mb = 25, .compress = f16, .clip = 0}, 4) < 3e-3);
}

TEST_CASE("DDP buckets: reverse registration order; split by bucket size; bytes counted", "[dist]") {
  auto m = make_mlp(1);
  dist::DdpOptions o;
  o.bucket_mb = 600.0 / (1024 * 1024);  // 600 bytes: 150 f32 values
  dist::DistributedDataParallel ddp(*m, dist::default_group(), o);
  // In reverse registration order the parameters hold 2, 32, 16, 512, 32, 256 values; greedy buckets of <= 150
  // values that start a new bucket when the next would not fit: [2+32+16], [512], [32], [256].
  CHECK(ddp.stats().buckets == 4);
  CHECK(ddp.stats().bytes_per_step == (2 + 32 + 16 + 512 + 32 + 256) * 4);
}

TEST_CASE("DDP: a backward that leaves a parameter without gradient needs finish_gradient_sync", "[dist]") {
  auto m = make_mlp(2);
  dist::DistributedDataParallel ddp(*m, dist::default_group());
  auto& first = static_cast<nn::Linear&>(*m->named_children()[0].second);
  // Only the first layer's weight gets a gradient (its bias and the rest do not).
  sum(first.weight).backward();
  CHECK_THROWS_WITH(ddp(zeros({1, 8})), Catch::Contains("finish_gradient_sync"));
  ddp.finish_gradient_sync();
  // Every rank had gradient 1 for the weight: the average is 1; the others averaged zeros.
  CHECK(first.weight.grad().to_vector<double>() == std::vector<double>(256, 1.0));
  CHECK(first.bias.grad().to_vector<double>() == std::vector<double>(32, 0.0));
  CHECK_NOTHROW(ddp(zeros({1, 8})));
}
