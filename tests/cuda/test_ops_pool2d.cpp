// Max and average pooling on cuda:0 against the CPU kernels: overlapping, disjoint and
// padded windows, odd sizes, every floating dtype, outputs poisoned first; NaN and -inf
// inputs; and the gradients through autograd.
#include <catch2/catch.hpp>

#include <limits>

#include "ops/pool2d_kernels.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

namespace {

// x [N, H, W, C] pooled by R x S at stride (sh, sw), padding (ph, pw), as ops/pool2d.cpp sizes it.
Pool2dGeometry geometry(const Shape& x, int64_t R, int64_t S, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  return {x[0], x[1], x[2], x[3], R, S, sh, sw, ph, pw, (x[1] + 2 * ph - R) / sh + 1, (x[2] + 2 * pw - S) / sw + 1};
}

const Pool2dGeometry kGeometries[] = {
    geometry({2, 9, 9, 5}, 3, 3, 2, 2, 1, 1),   // overlapping, padded
    geometry({2, 8, 10, 3}, 2, 2, 2, 2, 0, 0),  // disjoint (the U-Net's)
    geometry({1, 7, 6, 7}, 3, 2, 1, 1, 1, 1),   // stride 1, padded
    geometry({3, 5, 9, 2}, 2, 3, 3, 2, 0, 1),   // stride larger than the kernel rows
};

Shape in_shape(const Pool2dGeometry& g) { return {g.N, g.H, g.W, g.C}; }
Shape out_shape(const Pool2dGeometry& g) { return {g.N, g.P, g.Q, g.C}; }

// x with a NaN and a window of -inf planted, so both rules are exercised.
Tensor pool_input(const Pool2dGeometry& g, DType dt, uint64_t seed) {
  Tensor x = test::random_cpu(in_shape(g), f64, seed);
  double* p = x.data<double>();
  p[3] = std::numeric_limits<double>::quiet_NaN();
  for (int64_t c = 0; c < g.C; ++c) p[(g.H * g.W - 1) * g.C + c] = -std::numeric_limits<double>::infinity();
  return x.to(dt);
}

}  // namespace

TEST_CASE("cuda max_pool2d equals the CPU's, values and argmax, and its backward", "[cuda][ops][pool2d]") {
  HG_REQUIRE_CUDA();
  uint64_t seed = 40;
  for (const Pool2dGeometry& g : kGeometries) {
    for (DType dt : test::kFloatingDtypes) {
      INFO(dtype_name(dt) << " H=" << g.H << " W=" << g.W << " kernel " << g.R << "x" << g.S << " stride " << g.sh
                          << "x" << g.sw);
      const Tensor x = pool_input(g, dt, ++seed);
      Tensor y = empty(out_shape(g), {dt, Device::cpu()}), am = empty(out_shape(g), {i64, Device::cpu()});
      max_pool2d_stub(Device::cpu(), x, y, am, g);
      Tensor yc = test::poisoned(out_shape(g), dt, kCuda), amc = full(out_shape(g), -5.0, {i64, kCuda});
      max_pool2d_stub(kCuda, x.to(kCuda), yc, amc, g);
      test::require_equal(yc, y);  // the maximum is copied: bit-exact
      test::require_equal(amc, am);

      const Tensor gy = test::random_cpu(out_shape(g), dt, ++seed);
      Tensor gx = empty(in_shape(g), {dt, Device::cpu()});
      max_pool2d_backward_stub(Device::cpu(), gy, am, gx, g);
      Tensor gxc = test::poisoned(in_shape(g), dt, kCuda);
      max_pool2d_backward_stub(kCuda, gy.to(kCuda), amc, gxc, g);
      test::require_close(gxc, gx);
    }
  }
}

TEST_CASE("cuda avg_pool2d equals the CPU's, forward and backward", "[cuda][ops][pool2d]") {
  HG_REQUIRE_CUDA();
  uint64_t seed = 60;
  for (const Pool2dGeometry& g : kGeometries) {
    for (DType dt : test::kFloatingDtypes) {
      INFO(dtype_name(dt) << " H=" << g.H << " W=" << g.W << " kernel " << g.R << "x" << g.S << " stride " << g.sh
                          << "x" << g.sw);
      const Tensor x = test::random_cpu(in_shape(g), dt, ++seed);
      Tensor y = empty(out_shape(g), {dt, Device::cpu()});
      avg_pool2d_stub(Device::cpu(), x, y, g);
      Tensor yc = test::poisoned(out_shape(g), dt, kCuda);
      avg_pool2d_stub(kCuda, x.to(kCuda), yc, g);
      test::require_close(yc, y);

      const Tensor gy = test::random_cpu(out_shape(g), dt, ++seed);
      Tensor gx = empty(in_shape(g), {dt, Device::cpu()});
      avg_pool2d_backward_stub(Device::cpu(), gy, gx, g);
      Tensor gxc = test::poisoned(in_shape(g), dt, kCuda);
      avg_pool2d_backward_stub(kCuda, gy.to(kCuda), gxc, g);
      test::require_close(gxc, gx);
    }
  }
}

TEST_CASE("pooling on cuda through autograd equals the CPU", "[cuda][ops][pool2d]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::kFloatingDtypes) {
    INFO(dtype_name(dt));
    const Tensor x0 = test::random_cpu({2, 9, 7, 3}, dt, 80);
    for (bool is_max : {true, false}) {
      INFO((is_max ? "max_pool2d" : "avg_pool2d"));
      Tensor out[2], gx[2];
      for (int d = 0; d < 2; ++d) {
        const Device dev = d == 0 ? Device::cpu() : kCuda;
        Tensor x = x0.to(dev).detach();
        x.set_requires_grad();
        const Pool2dOptions o{{3, 3}, {2, 2}, {1, 1}};
        out[d] = is_max ? max_pool2d(x, o) : avg_pool2d(x, o);
        out[d].backward(test::random_cpu(out[d].shape(), dt, 81).to(dev));
        gx[d] = x.grad();
      }
      REQUIRE(out[1].device() == kCuda);
      test::require_close(out[1], out[0]);
      test::require_close(gx[1], gx[0]);
    }
  }
}

TEST_CASE("cuda pooling kernels refuse non-contiguous tensors", "[cuda][ops][pool2d]") {
  HG_REQUIRE_CUDA();
  const Pool2dGeometry g = geometry({1, 4, 4, 2}, 2, 2, 2, 2, 0, 0);
  const Tensor x = zeros({1, 4, 4, 2}, {f32, kCuda}), y = zeros({1, 2, 2, 2}, {f32, kCuda});
  REQUIRE_THROWS_WITH(avg_pool2d_stub(kCuda, x.transpose(1, 2), y, g), Catch::Matchers::Contains("contiguous"));
}
