// Reductions on cuda against the CPU kernels: sum/mean/max/min over leading, trailing,
// middle and all axes, odd sizes, non-contiguous inputs, NaN propagation, i64, argmax
// (first maximum, NaN wins), and gradients through autograd.
#include <catch2/catch.hpp>

#include "ops/reduce_kernels.h"
#include "tests/cuda/ops_compare.h"

using namespace hg;
using hg::test::kCuda;

TEST_CASE("sum, mean, max and min on cuda match the CPU over any axes", "[cuda][ops][reduce]") {
  HG_REQUIRE_CUDA();
  const std::vector<std::vector<int64_t>> axes_list{{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1}};
  for (DType dt : test::float_dtypes()) {
    const Tensor x = test::random_input({7, 37, 11}, dt, 5);
    const Tensor xd = x.to(kCuda);
    for (const auto& axes : axes_list)
      for (int k = 0; k < 4; ++k) {
        INFO(dtype_name(dt) << " op " << k << " over " << axes.size() << " axes, first " << (axes.empty() ? -1 : axes[0]));
        const auto op = static_cast<ReduceOp>(k);
        auto run = [&](const Tensor& t) {
          switch (op) {
            case ReduceOp::sum: return sum(t, axes, true);
            case ReduceOp::mean: return mean(t, axes, true);
            case ReduceOp::max: return max(t, axes, true);
            case ReduceOp::min: return min(t, axes, true);
          }
          return Tensor();
        };
        // Sums of n values of size ~3 in another order: the error scales with sqrt(n) * 3.
        test::require_same(run(xd), run(x), 3.0 * std::sqrt(static_cast<double>(x.numel())));
        test::require_same(run(xd.transpose(0, 2)), run(x.transpose(0, 2)), 3.0 * std::sqrt(static_cast<double>(x.numel())));
      }
  }
  // The output is written by the kernel into a poisoned tensor; NaN propagates through max/min.
  Tensor x = test::random_input({5, 300}, f32, 9);
  fill_(x.narrow(0, 2, 1).narrow(1, 150, 1), NAN);
  for (int k = 0; k < 4; ++k) {
    Tensor cpu = empty({5, 1}), dev = test::poisoned({5, 1}, f32);
    reduce_stub(Device::cpu(), static_cast<ReduceOp>(k), x, cpu);
    reduce_stub(kCuda, static_cast<ReduceOp>(k), x.to(kCuda), dev);
    test::require_same(dev, cpu, 100.0);
    REQUIRE(std::isnan(dev.to(Device::cpu()).to_vector<double>()[2]));
  }
  const Tensor i = randint(-1000, 1000, {13, 77});
  REQUIRE(sum(i.to(kCuda), {1}).to(Device::cpu()).to_vector<int64_t>() == sum(i, {1}).to_vector<int64_t>());
  REQUIRE(max(i.to(kCuda), {0}).to(Device::cpu()).to_vector<int64_t>() == max(i, {0}).to_vector<int64_t>());
}

TEST_CASE("argmax on cuda finds the first maximum like the CPU, NaN first", "[cuda][ops][reduce]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes()) {
    INFO(dtype_name(dt));
    // Few distinct values so ties are common.
    Tensor x = (test::random_input({9, 13, 6}, f64, 3, 0, 4)).to(i64).to(dt);
    fill_(x.narrow(0, 1, 1).narrow(1, 4, 1).narrow(2, 2, 1), NAN);
    for (int64_t axis = 0; axis < 3; ++axis) {
      INFO("axis " << axis);
      REQUIRE(argmax(x.to(kCuda), axis).to(Device::cpu()).to_vector<int64_t>() == argmax(x, axis).to_vector<int64_t>());
      REQUIRE(argmax(x.to(kCuda).transpose(0, 2), axis, true).to(Device::cpu()).to_vector<int64_t>() ==
              argmax(x.transpose(0, 2), axis, true).to_vector<int64_t>());
    }
  }
}

TEST_CASE("reduction gradients on cuda match the CPU's", "[cuda][ops][reduce][autograd]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes()) {
    INFO(dtype_name(dt));
    const Tensor x0 = test::random_input({6, 21, 5}, dt, 17), w0 = test::random_input({6, 1, 5}, dt, 18);
    auto run = [&](Device d) {
      Tensor x = x0.to(d).detach().set_requires_grad(), w = w0.to(d).detach().set_requires_grad();
      Tensor loss = sum(mean(x * w, {1})) + sum(max(x, {1})) - sum(min(x, {0, 2}));
      loss.backward();
      return std::tuple{loss, x.grad(), w.grad()};
    };
    const auto [l_cpu, gx_cpu, gw_cpu] = run(Device::cpu());
    const auto [l_dev, gx_dev, gw_dev] = run(kCuda);
    test::require_same(l_dev, l_cpu, 30.0);
    test::require_same(gx_dev, gx_cpu, 1.0);
    test::require_same(gw_dev, gw_cpu, 10.0);
  }
}
