// The loss scaler's kernels on cuda against the CPU's: the multi-tensor unscale with
// per-tensor non-finite counts and the found-inf flag, the scale update state machine, and
// a few AMP training steps (autocast f16, GradScaler, Adam) of an MLP on cuda vs the CPU,
// and the scaler's skip-streak watch, which must not make update() wait for the device.
#include <catch2/catch.hpp>

#include <cmath>

#include "halfgrad.h"
#include "ops/amp_kernels.h"
#include "tests/cuda/ops_compare.h"
#ifdef HG_CUDA_EMULATION
#include "cuda/emu/host_waits.h"
#endif

using namespace hg;
using hg::test::kCuda;

TEST_CASE("the multi-tensor unscale on cuda matches the CPU, counts and flag included", "[cuda][ops][amp]") {
  HG_REQUIRE_CUDA();
  // Sizes around the block chunk (16384) and odd ones; every dtype; infs planted in two.
  const std::vector<std::pair<int64_t, DType>> spec{{5, f32}, {16385, f16}, {1000, bf16}, {33000, f32}, {7, f64}, {300, f16}};
  std::vector<Tensor> cpu, dev;
  for (size_t i = 0; i < spec.size(); ++i) {
    Tensor g = test::random_input({spec[i].first}, spec[i].second, 50 + i, -6e4, 6e4);
    if (i == 1) fill_(g.narrow(0, 16384, 1), INFINITY);
    if (i == 3) fill_(g.narrow(0, 100, 3), NAN);
    cpu.push_back(g.clone());
    dev.push_back(g.to(kCuda));
  }
  // A view one element into its storage: not 16-byte aligned, so the kernel's per-element
  // path runs instead of its 16-byte loads (each clone below keeps the offset).
  const Tensor whole = test::random_input({4100}, f16, 60, -6e4, 6e4).to(kCuda);
  cpu.push_back(whole.narrow(0, 1, 4099).to(Device::cpu()));
  const auto offset_clone = [&] {
    const Tensor w = whole.clone();
    return w.narrow(0, 1, 4099);
  };
  for (const float inv : {1.0f / 65536.0f, 4.0f}) {  // 4: f16 values above 16376 overflow when unscaled
    INFO("inv_scale " << inv);
    std::vector<Tensor> c, d;
    for (size_t i = 0; i < cpu.size(); ++i) {
      c.push_back(cpu[i].clone());
      d.push_back(i < dev.size() ? dev[i].clone() : offset_clone());
    }
    const int64_t n = static_cast<int64_t>(c.size());
    Tensor inv_c = scalar_tensor(inv), found_c = scalar_tensor(0.0), counts_c = full({n}, -1, {i64});
    Tensor inv_d = inv_c.to(kCuda), found_d = found_c.to(kCuda), counts_d = full({n}, -1, {i64, kCuda});
    unscale_and_check_stub(Device::cpu(), c, inv_c, found_c, counts_c);
    unscale_and_check_stub(kCuda, d, inv_d, found_d, counts_d);
    REQUIRE(counts_d.to(Device::cpu()).to_vector<int64_t>() == counts_c.to_vector<int64_t>());
    REQUIRE(found_d.item<float>() == found_c.item<float>());
    REQUIRE(found_c.item<float>() == 1.0f);
    for (size_t i = 0; i < c.size(); ++i) test::require_same(d[i], c[i]);
  }
  // All finite: the flag stays as it was, every count 0.
  std::vector<Tensor> fine{test::random_input({999}, f32, 3).to(kCuda)};
  Tensor found = scalar_tensor(0.0, {f32, kCuda}), counts = full({1}, 9, {i64, kCuda});
  unscale_and_check_stub(kCuda, fine, scalar_tensor(0.5, {f32, kCuda}), found, counts);
  REQUIRE(found.item<float>() == 0.0f);
  REQUIRE(counts.item<int64_t>() == 0);
}

TEST_CASE("the scale update on cuda follows the CPU's state machine", "[cuda][ops][amp]") {
  HG_REQUIRE_CUDA();
  const ScaleUpdateParams p{.growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 3, .hysteresis = 2,
                            .min_scale = 1.0, .max_scale = 1e6};
  const ScaleState c{scalar_tensor(1024.0), scalar_tensor(0, {i64}), scalar_tensor(2, {i64}), scalar_tensor(0, {i64})};
  const ScaleState d{c.scale.to(kCuda), c.growth_tracker.to(kCuda), c.hysteresis_tracker.to(kCuda),
                     c.skip_streak.to(kCuda)};
  const int infs[] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  for (int step = 0; step < static_cast<int>(std::size(infs)); ++step) {
    INFO("step " << step);
    const Tensor f = scalar_tensor(infs[step] ? (step % 2 ? INFINITY : 1.0) : 0.0);
    update_scale_stub(Device::cpu(), c, f, p);
    update_scale_stub(kCuda, d, f.to(kCuda), p);
    REQUIRE(d.scale.item<float>() == c.scale.item<float>());
    REQUIRE(d.growth_tracker.item<int64_t>() == c.growth_tracker.item<int64_t>());
    REQUIRE(d.hysteresis_tracker.item<int64_t>() == c.hysteresis_tracker.item<int64_t>());
    REQUIRE(d.skip_streak.item<int64_t>() == c.skip_streak.item<int64_t>());
  }
  REQUIRE(c.scale.item<float>() == 1.0f);  // backed off down to min_scale
  REQUIRE(c.hysteresis_tracker.item<int64_t>() == 0);  // stops at 0 however many overflows follow
  REQUIRE(c.skip_streak.item<int64_t>() == 14);  // the trailing run of overflows
}

TEST_CASE("AMP training of an MLP on cuda follows the same run on the CPU", "[cuda][ops][amp][training]") {
  HG_REQUIRE_CUDA();
  Generator g(21);
  const Tensor x = randn({32, 12}, {f32}, &g), y = randn({32, 3}, {f32}, &g);
  auto train = [&](Device d) {
    manual_seed(4);
    MLP mlp(12, {24}, 3);
    mlp.to(d);
    optim::Adam opt(mlp.named_parameters(), optim::AdamOptions{.lr = 0.01});
    amp::GradScalerOptions so;
    so.growth_interval = 2;
    amp::GradScaler scaler(so, d);
    std::vector<double> losses;
    const Tensor xd = x.to(d), yd = y.to(d);
    for (int step = 0; step < 6; ++step) {
      Tensor loss;
      {
        amp::Autocast ac(f16);
        loss = mean(square(mlp(xd).to(f32) - yd));
      }
      losses.push_back(loss.item<double>());
      scaler.scale(loss).backward();
      scaler.step(opt);
      scaler.update();
      opt.zero_grad();
    }
    losses.push_back(scaler.get_scale());
    return losses;
  };
  const std::vector<double> on_cpu = train(Device::cpu());
  const std::vector<double> on_cuda = train(kCuda);
  REQUIRE(on_cuda.back() == on_cpu.back());  // the same scale after growth
  REQUIRE(on_cpu[5] < on_cpu[0]);            // it learns
  for (size_t s = 0; s + 1 < on_cpu.size(); ++s) {
    INFO("step " << s);
    CHECK(on_cuda[s] == Approx(on_cpu[s]).epsilon(5e-3));
  }
}

TEST_CASE("the scaler's skip-streak watch reports on cuda without a host wait in update()", "[cuda][emu][grad_scaler]") {
  HG_REQUIRE_CUDA();
#ifndef HG_CUDA_EMULATION
  HG_SKIP("host waits are counted by the CUDA emulation only");
#else
  Tensor p = tensor({1.0, 2.0}, {f32, kCuda}).set_requires_grad();
  optim::SGD opt({{"layer.weight", p}}, optim::SGDOptions{.lr = 0.0});
  amp::GradScalerOptions o;
  o.skip_streak_limit = 3;
  amp::GradScaler scaler(o, kCuda);
  const Tensor bad = tensor({1.0, INFINITY}, {f32, kCuda});
  WarningCapture warnings;
  int64_t waits_in_update = 0;
  for (int i = 0; i < 8; ++i) {
    p.set_grad(Tensor());
    scaler.scale(sum(p * bad)).backward();
    scaler.step(opt);
    const int64_t before = cuda::emu::host_waits();
    scaler.update();
    waits_in_update += cuda::emu::host_waits() - before;
  }
  CHECK(waits_in_update == 0);
  REQUIRE(warnings.messages().size() == 1);
  CHECK_THAT(warnings.messages()[0], Catch::Contains("layer.weight (1 of 2)"));
#endif
}
