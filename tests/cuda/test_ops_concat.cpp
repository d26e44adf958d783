// cat, stack, split/chunk and pad on cuda:0 against the CPU. They have no kernels of their
// own (copies into strided views, fills of border slices), so these tests check that the
// cuda copy and fill kernels serve them, mixed dtypes and gradients included.
#include <catch2/catch.hpp>

#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

namespace {

// Runs f on the CPU and on cuda:0 with fresh leaf copies of `inputs`, back-propagates the
// same random gradient, and compares outputs and input gradients bit for bit (copies and
// sums of single terms are exact).
template <class F>
void compare_on_devices(const std::vector<Tensor>& inputs, F f, uint64_t seed) {
  Tensor out[2];
  std::vector<Tensor> grads[2];
  for (int d = 0; d < 2; ++d) {
    const Device dev = d == 0 ? Device::cpu() : kCuda;
    std::vector<Tensor> xs;
    for (const Tensor& t : inputs) {
      xs.push_back(t.to(dev).detach());
      xs.back().set_requires_grad();
    }
    out[d] = f(xs);
    out[d].backward(test::random_cpu(out[d].shape(), out[d].dtype(), seed).to(dev));
    for (const Tensor& x : xs) grads[d].push_back(x.grad());
  }
  REQUIRE(out[1].device() == kCuda);
  test::require_equal(out[1], out[0]);
  for (size_t i = 0; i < inputs.size(); ++i) test::require_equal(grads[1][i], grads[0][i]);
}

}  // namespace

TEST_CASE("cat and stack on cuda equal the CPU, along every axis", "[cuda][ops][concat]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::kFloatingDtypes) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      INFO(dtype_name(dt) << " axis " << axis);
      Shape a{3, 5, 7}, b{3, 5, 7};
      b[static_cast<size_t>(axis)] = 4;
      const std::vector<Tensor> in{test::random_cpu(a, dt, 10 + axis), test::random_cpu(b, dt, 20 + axis)};
      compare_on_devices(in, [&](const std::vector<Tensor>& xs) { return cat(xs, axis); }, 30 + axis);
    }
    INFO(dtype_name(dt) << " stack");
    const std::vector<Tensor> in{test::random_cpu({4, 6}, dt, 1), test::random_cpu({4, 6}, dt, 2),
                                 test::random_cpu({4, 6}, dt, 3)};
    compare_on_devices(in, [](const std::vector<Tensor>& xs) { return stack(xs, 1); }, 4);
  }
}

TEST_CASE("cat on cuda promotes mixed dtypes as the CPU does", "[cuda][ops][concat]") {
  HG_REQUIRE_CUDA();
  const std::vector<Tensor> in{test::random_cpu({2, 9}, f16, 5), test::random_cpu({2, 3}, bf16, 6),
                               test::random_cpu({2, 4}, f32, 7)};
  compare_on_devices(in, [](const std::vector<Tensor>& xs) { return cat(xs, 1); }, 8);
}

TEST_CASE("split and chunk on cuda are views whose gradients land in place", "[cuda][ops][concat]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::kFloatingDtypes) {
    INFO(dtype_name(dt));
    const std::vector<Tensor> in{test::random_cpu({5, 11, 3}, dt, 40)};
    // Only some pieces reach the output: the others' gradient slices must be zeros.
    compare_on_devices(in, [](const std::vector<Tensor>& xs) {
      const std::vector<Tensor> p = split(xs[0], 4, 1);
      REQUIRE(p.size() == 3);
      const std::vector<Tensor> q = chunk(xs[0], 2, 0);
      return cat({p[2], p[0]}, 1) * 1.0 + cat({q[0].narrow(1, 0, 7), q[0].narrow(1, 0, 7)}, 0).narrow(0, 0, 5);
    }, 41);
  }
}

TEST_CASE("pad on cuda equals the CPU, every axis, any value", "[cuda][ops][concat]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::kFloatingDtypes) {
    INFO(dtype_name(dt));
    const std::vector<Tensor> in{test::random_cpu({2, 5, 7, 3}, dt, 50)};
    compare_on_devices(in, [](const std::vector<Tensor>& xs) { return pad(xs[0], {0, 1, 2, 0}, {1, 0, 3, 2}, -1.5); },
                       51);
    // A transposed (non-contiguous) input is copied into the interior through its strides.
    compare_on_devices(in, [](const std::vector<Tensor>& xs) { return pad(xs[0].transpose(1, 2), {1, 1, 1, 1}, {0, 2, 0, 1}); },
                       52);
  }
}
