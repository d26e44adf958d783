// conv2d's three kernels on cuda:0 against the CPU's (stride, padding, dilation, groups,
// depthwise, pointwise; every floating dtype; outputs poisoned first), and conv2d /
// conv_transpose2d with their gradients through autograd.
#include <catch2/catch.hpp>

#include "ops/conv2d_kernels.h"
#include "tests/cuda/conv_cases.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

namespace {

// Odd image sizes and channel counts, so no GEMM dimension divides its tile.
const test::ConvCase kCases[] = {
    {{2, 9, 9, 5}, {7, 3, 3, 5}, {{1, 1}, {1, 1}, {1, 1}, 1}, "3x3 same"},
    {{2, 9, 9, 5}, {6, 3, 3, 5}, {{2, 2}, {1, 1}, {1, 1}, 1}, "3x3 stride 2"},
    {{1, 11, 10, 4}, {4, 3, 2, 4}, {{1, 2}, {2, 0}, {2, 1}, 1}, "dilated, asymmetric"},
    {{2, 9, 9, 6}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}, "2 groups"},
    {{2, 9, 9, 6}, {6, 3, 3, 1}, {{1, 1}, {1, 1}, {1, 1}, 6}, "depthwise"},
    {{2, 9, 9, 5}, {3, 1, 1, 5}, {{1, 1}, {0, 0}, {1, 1}, 1}, "pointwise"},
    {{1, 8, 8, 3}, {5, 2, 2, 3}, {{2, 2}, {0, 0}, {1, 1}, 1}, "2x2 stride 2"},
};

// conv2d's forward stub without a bias, called as the gradient stubs are.
void forward_no_bias(Device d, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p) {
  conv2d_forward_stub(d, x, w, Tensor(), y, p);
}
void dgrad_no_bias(Device d, const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dOptions& p) {
  conv2d_dgrad_stub(d, gy, w, Tensor(), gx, p);
}

// Runs `stub` on the CPU and (into a poisoned output) on cuda:0 and compares.
template <class F>
void compare_stub(const F& stub, const Tensor& a, const Tensor& b, const Shape& out, const Conv2dOptions& p) {
  Tensor want = empty(out, {a.dtype(), Device::cpu()});
  stub(Device::cpu(), a, b, want, p);
  Tensor got = test::poisoned(out, a.dtype(), kCuda);
  stub(kCuda, a.to(kCuda), b.to(kCuda), got, p);
  test::require_close(got, want);
}

}  // namespace

TEST_CASE("cuda conv2d forward, input and weight gradients equal the CPU's", "[cuda][ops][conv2d]") {
  HG_REQUIRE_CUDA();
  uint64_t seed = 100;
  for (const test::ConvCase& c : kCases) {
    for (DType dt : test::kFloatingDtypes) {
      INFO(c.what << " " << dtype_name(dt));
      const Shape ys = test::output_shape(c);
      const Tensor x = test::random_cpu(c.x, dt, ++seed), w = test::random_cpu(c.w, dt, ++seed);
      const Tensor gy = test::random_cpu(ys, dt, ++seed);
      {
        INFO("forward");
        compare_stub(forward_no_bias, x, w, ys, c.p);
      }
      {
        INFO("input gradient");
        compare_stub(dgrad_no_bias, gy, w, c.x, c.p);
      }
      {
        INFO("weight gradient");
        compare_stub(conv2d_wgrad_stub, gy, x, c.w, c.p);
      }
    }
  }
}

TEST_CASE("cuda conv2d kernels refuse non-contiguous tensors", "[cuda][ops][conv2d]") {
  HG_REQUIRE_CUDA();
  const Tensor x = zeros({1, 5, 5, 2}, {f32, kCuda}), w = zeros({2, 3, 3, 2}, {f32, kCuda});
  const Tensor y = zeros({1, 3, 3, 2}, {f32, kCuda});
  REQUIRE_THROWS_WITH(conv2d_forward_stub(kCuda, x.transpose(1, 2), w, Tensor(), y, Conv2dOptions{}),
                      Catch::Matchers::Contains("contiguous"));
}

TEST_CASE("conv2d and conv_transpose2d on cuda: outputs and gradients equal the CPU's", "[cuda][ops][conv2d]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::kFloatingDtypes) {
    INFO(dtype_name(dt));
    const Tensor x0 = test::random_cpu({2, 9, 9, 4}, dt, 7), w0 = test::random_cpu({6, 3, 3, 2}, dt, 8);
    for (bool transposed : {false, true}) {
      INFO((transposed ? "conv_transpose2d" : "conv2d"));
      Tensor out[2], gx[2], gw[2];
      for (int d = 0; d < 2; ++d) {
        const Device dev = d == 0 ? Device::cpu() : kCuda;
        Tensor x = x0.to(dev).detach(), w = (transposed ? w0.narrow(0, 0, 4) : w0).to(dev).detach();
        x.set_requires_grad();
        w.set_requires_grad();
        out[d] = transposed ? conv_transpose2d(x, w, Tensor(), {{2, 2}, {1, 1}, {1, 1}, {1, 1}, 2})
                            : conv2d(x, w, Tensor(), {{2, 1}, {1, 1}, {1, 1}, 2});
        const Tensor g = test::random_cpu(out[d].shape(), dt, 9).to(dev);
        out[d].backward(g);
        gx[d] = x.grad();
        gw[d] = w.grad();
      }
      REQUIRE(out[1].device() == kCuda);
      test::require_close(out[1], out[0]);
      test::require_close(gx[1], gx[0]);
      test::require_close(gw[1], gw[0]);
    }
  }
}

TEST_CASE("cuda conv2d adds its bias in the f32 sum and rounds once", "[cuda][ops][conv2d][numerics]") {
  HG_REQUIRE_CUDA();
  // 1024 + 0.25 is no f16; summed in f32 with the bias -1024 it is 0.25 (tensor-core path),
  // also with 2 groups (the SIMT path) and in f32.
  for (DType dt : {f16, f32}) {
    INFO(dtype_name(dt));
    const Tensor x = from_vector({1024, 0.25}, {1, 1, 1, 2}, {dt, kCuda}), w = from_vector({1, 1}, {1, 1, 1, 2}, {dt, kCuda});
    CHECK(conv2d(x, w, from_vector({-1024}, {1}, {dt, kCuda})).item<double>() == 0.25);
    const Tensor xg = from_vector({1024, 0.25, 1024, 0.25}, {1, 1, 1, 4}, {dt, kCuda});
    const Tensor wg = from_vector({1, 1, 1, 1}, {2, 1, 1, 2}, {dt, kCuda});
    const Tensor y = conv2d(xg, wg, from_vector({-1024, -1023}, {2}, {dt, kCuda}), {{1, 1}, {0, 0}, {1, 1}, 2});
    CHECK(y.to_vector<double>() == std::vector<double>{0.25, 1.25});
  }
}
