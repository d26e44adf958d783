// The losses on cuda against the CPU kernels: cross-entropy (class weights, ignore_index, all
// rows ignored, invalid labels found at the same position), BCE-with-logits and MSE, soft
// Dice; every floating dtype, row counts past one chunk, and the gradients through autograd.
#include <catch2/catch.hpp>

#include "ops/loss_kernels.h"
#include "tests/cuda/ops_compare.h"

using namespace hg;
using hg::test::kCuda;

namespace {

// Labels in [0, C), every `ignore_every`-th one replaced by ignore_index -100.
Tensor labels(int64_t n, int64_t C, uint64_t seed, int64_t ignore_every = 0) {
  Generator g(seed);
  Tensor t = randint(0, C, {n}, {i64}, &g);
  const int64_t m = ignore_every > 0 ? n / ignore_every : 0;
  if (m > 0) fill_(t.narrow(0, 0, m * ignore_every).view({m, ignore_every}).narrow(1, 1, 1), -100.0);
  return t;
}

}  // namespace

TEST_CASE("cross_entropy on cuda matches the CPU, weights and ignore_index included", "[cuda][ops][loss]") {
  HG_REQUIRE_CUDA();
  // C = 3 (4 lanes a row), 37 (a block a row); N = 1100 spans several row loops.
  for (DType dt : test::float_dtypes())
    for (const auto& [N, C] : std::vector<std::pair<int64_t, int64_t>>{{1100, 3}, {45, 37}, {1, 1}})
      for (bool weighted : {false, true}) {
        INFO(dtype_name(dt) << " N " << N << " C " << C << (weighted ? " weighted" : ""));
        const Tensor x = test::random_input({N, C}, dt, 31, -5, 5);
        const Tensor t = labels(N, C, 32, N >= 5 ? 5 : 0);
        CrossEntropyOptions o;
        if (weighted) o.weight = test::random_input({C}, f32, 33, 0.1, 2.0);
        CrossEntropyOptions od = o;
        if (weighted) od.weight = o.weight.to(kCuda);
        test::require_same(cross_entropy(x.to(kCuda), t.to(kCuda), od), cross_entropy(x, t, o), 1.0);
      }
}

TEST_CASE("cross_entropy's kernel on cuda writes lse and wsum like the CPU's", "[cuda][ops][loss]") {
  HG_REQUIRE_CUDA();
  const int64_t N = 300, C = 6;
  const Tensor x = test::random_input({N, C}, f16, 41, -8, 8), t = labels(N, C, 42, 4);
  const Tensor w = test::random_input({C}, f32, 43, 0.5, 1.5);
  Tensor loss_c = empty({}, {f16}), lse_c = empty({N}), wsum_c = empty({});
  Tensor loss_d = test::poisoned({}, f16), lse_d = test::poisoned({N}, f32), wsum_d = test::poisoned({}, f32);
  REQUIRE(cross_entropy_stub(Device::cpu(), x, t, w, -100, loss_c, lse_c, wsum_c) == -1);
  REQUIRE(cross_entropy_stub(kCuda, x.to(kCuda), t.to(kCuda), w.to(kCuda), -100, loss_d, lse_d, wsum_d) == -1);
  test::require_same(loss_d, loss_c, 1.0);
  test::require_same(lse_d, lse_c, 1.0);
  test::require_same(wsum_d, wsum_c, 10.0);
}

TEST_CASE("cross_entropy on cuda: all rows ignored is NaN, invalid labels raise at the first one",
          "[cuda][ops][loss]") {
  HG_REQUIRE_CUDA();
  const Tensor x = test::random_input({6, 4}, f32, 51);
  const Tensor ignored = full({6}, -100, {i64});
  REQUIRE(std::isnan(cross_entropy(x.to(kCuda), ignored.to(kCuda)).item<float>()));
  REQUIRE(std::isnan(cross_entropy(x, ignored).item<float>()));
  for (const int64_t bad : {4, -1, 7}) {
    INFO("bad label " << bad);
    Tensor t = full({6}, 1, {i64});
    fill_(t.narrow(0, 5, 1), static_cast<double>(bad));
    fill_(t.narrow(0, 2, 1), 9.0);  // the first invalid one is at 2
    std::string cpu_msg, dev_msg;
    try {
      cross_entropy(x, t);
    } catch (const Error& e) {
      cpu_msg = e.what();
    }
    try {
      cross_entropy(x.to(kCuda), t.to(kCuda));
    } catch (const Error& e) {
      dev_msg = e.what();
    }
    REQUIRE(dev_msg.find("target value 9 at flat position 2") != std::string::npos);
    REQUIRE(dev_msg == cpu_msg);
  }
}

TEST_CASE("bce_with_logits and mse_loss on cuda match the CPU", "[cuda][ops][loss]") {
  HG_REQUIRE_CUDA();
  // 5000 elements: two partial blocks; 7: one, mostly idle.
  for (DType dt : test::float_dtypes())
    for (const Shape& s : std::vector<Shape>{{7}, {50, 100}}) {
      INFO(dtype_name(dt) << " " << shape_str(s));
      const Tensor x = test::random_input(s, dt, 61, -30, 30), y = test::random_input(s, dt, 62, 0, 1);
      test::require_same(bce_with_logits(x.to(kCuda), y.to(kCuda)), bce_with_logits(x, y), 1.0);
      test::require_same(mse_loss(x.to(kCuda), y.to(kCuda)), mse_loss(x, y), 1.0);
    }
}

TEST_CASE("soft_dice on cuda matches the CPU, statistics and invalid labels included", "[cuda][ops][loss]") {
  HG_REQUIRE_CUDA();
  // N = 2100 rows: three chunks of 1024; C = 40: two class tiles.
  for (DType dt : test::float_dtypes())
    for (const auto& [N, C] : std::vector<std::pair<int64_t, int64_t>>{{2100, 3}, {70, 40}}) {
      INFO(dtype_name(dt) << " N " << N << " C " << C);
      const Tensor p = softmax(test::random_input({N, C}, dt, 71), 1), t = labels(N, C, 72);
      Tensor dice_c = empty({C}, {dt}), stats_c = empty({3, C}, {dt == f64 ? f64 : f32});
      Tensor dice_d = test::poisoned({C}, dt), stats_d = test::poisoned({3, C}, dt == f64 ? f64 : f32);
      REQUIRE(soft_dice_stub(Device::cpu(), p, t, 1e-6, dice_c, stats_c) == -1);
      REQUIRE(soft_dice_stub(kCuda, p.to(kCuda), t.to(kCuda), 1e-6, dice_d, stats_d) == -1);
      test::require_same(dice_d, dice_c, 1.0);
      test::require_same(stats_d, stats_c, static_cast<double>(N));
    }
  const Tensor p = softmax(test::random_input({8, 3}, f32, 73), 1);
  Tensor t = full({8}, 2, {i64});
  fill_(t.narrow(0, 6, 1), 3.0);
  fill_(t.narrow(0, 3, 1), -2.0);
  Tensor dice = empty({3}, {f32, kCuda}), stats = empty({3, 3}, {f32, kCuda});
  REQUIRE(soft_dice_stub(kCuda, p.to(kCuda), t.to(kCuda), 1e-6, dice, stats) == 3);
  REQUIRE_THROWS_WITH(soft_dice(p.to(kCuda), t.to(kCuda)), Catch::Contains("target value -2 at flat position 3"));
}

TEST_CASE("loss gradients on cuda match the CPU's", "[cuda][ops][loss][autograd]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes()) {
    INFO(dtype_name(dt));
    const Tensor x0 = test::random_input({40, 5}, dt, 81), y0 = test::random_input({40, 5}, dt, 82, 0, 1);
    const Tensor t = labels(40, 5, 83, 7), t_dice = labels(40, 5, 85), w = test::random_input({5}, dt == f64 ? f64 : f32, 84, 0.5, 2);
    auto run = [&](Device d) {
      Tensor x = x0.to(d).detach().set_requires_grad(), y = y0.to(d).detach().set_requires_grad();
      const Tensor ce = cross_entropy(x, t.to(d), {.ignore_index = -100, .weight = w.to(d)});
      const Tensor dice = sum(soft_dice(softmax(x, 1), t_dice.to(d)) * w.to(d).to(dt));
      (ce + bce_with_logits(x, y) * 2.0 + mse_loss(y, x) + dice).backward();
      return std::pair{x.grad(), y.grad()};
    };
    const auto [gx_c, gy_c] = run(Device::cpu());
    const auto [gx_d, gy_d] = run(kCuda);
    test::require_same(gx_d, gx_c, 0.1);
    test::require_same(gy_d, gy_c, 0.1);
  }
}
