// softmax and log_softmax on cuda against the CPU kernels: rows short (a few lanes) and
// long (a block), the last axis and inner ones, strided inputs, NaN/inf rows, every
// floating dtype, and the backward through autograd.
#include <catch2/catch.hpp>

#include "ops/softmax_kernels.h"
#include "tests/cuda/ops_compare.h"

using namespace hg;
using hg::test::kCuda;

TEST_CASE("softmax and log_softmax on cuda match the CPU along any axis", "[cuda][ops][softmax]") {
  HG_REQUIRE_CUDA();
  // n = 3 (4 lanes a row, 64 rows a block), 37 (64 lanes: a block a row), 300 (256 lanes, looping).
  const std::vector<Shape> shapes{{5, 3}, {9, 37}, {3, 300}, {4, 7, 5}, {1, 1}};
  for (DType dt : test::float_dtypes())
    for (const Shape& s : shapes)
      for (int64_t axis = 0; axis < static_cast<int64_t>(s.size()); ++axis)
        for (bool log : {false, true}) {
          INFO(dtype_name(dt) << " " << shape_str(s) << " axis " << axis << (log ? " log_softmax" : " softmax"));
          const Tensor x = test::random_input(s, dt, 7 + static_cast<uint64_t>(axis), -8, 8);
          auto run = [&](const Tensor& t) { return log ? log_softmax(t, axis) : softmax(t, axis); };
          test::require_same(run(x.to(kCuda)), run(x), 1.0);
        }
}

TEST_CASE("softmax on cuda writes every output and propagates NaN and inf like the CPU", "[cuda][ops][softmax]") {
  HG_REQUIRE_CUDA();
  for (DType dt : {f32, f16}) {
    INFO(dtype_name(dt));
    Tensor x = test::random_input({6, 45}, dt, 3, -4, 4);
    fill_(x.narrow(0, 1, 1).narrow(1, 10, 1), NAN);
    fill_(x.narrow(0, 2, 1).narrow(1, 0, 1), INFINITY);   // inf - inf = NaN row, as on the CPU
    fill_(x.narrow(0, 3, 1), -INFINITY);                  // an all -inf row
    fill_(x.narrow(0, 4, 1).narrow(1, 44, 1), 60000.0);   // a dominant entry
    for (bool log : {false, true}) {
      INFO((log ? "log_softmax" : "softmax"));
      const Tensor x3 = x.view({6, 45, 1});
      Tensor cpu = empty({6, 45, 1}, {dt}), dev = test::poisoned({6, 45, 1}, dt);
      softmax_stub(Device::cpu(), x3, cpu, log);
      softmax_stub(kCuda, x3.to(kCuda), dev, log);
      test::require_same(dev, cpu, 1.0);
    }
  }
}

TEST_CASE("softmax on cuda takes strided inputs", "[cuda][ops][softmax]") {
  HG_REQUIRE_CUDA();
  const Tensor x = test::random_input({8, 33, 6}, f32, 11);
  for (int64_t axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    test::require_same(softmax(x.to(kCuda).transpose(0, 2), axis), softmax(x.transpose(0, 2), axis), 1.0);
    test::require_same(log_softmax(x.to(kCuda).narrow(1, 3, 20), axis), log_softmax(x.narrow(1, 3, 20), axis), 1.0);
  }
}

TEST_CASE("softmax gradients on cuda match the CPU's", "[cuda][ops][softmax][autograd]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes())
    for (bool log : {false, true})
      for (const auto& [s, axis] : std::vector<std::pair<Shape, int64_t>>{{{7, 5}, 1}, {{4, 300}, 1}, {{6, 9, 4}, 1}}) {
        INFO(dtype_name(dt) << (log ? " log_softmax " : " softmax ") << shape_str(s) << " axis " << axis);
        const Tensor x0 = test::random_input(s, dt, 21, -3, 3), w0 = test::random_input(s, dt, 22);
        auto run = [&](Device d) {
          Tensor x = x0.to(d).detach().set_requires_grad();
          const Tensor y = log ? log_softmax(x, axis) : softmax(x, axis);
          sum(y * w0.to(d)).backward();
          return x.grad();
        };
        test::require_same(run(kCuda), run(Device::cpu()), 3.0);
      }
}
