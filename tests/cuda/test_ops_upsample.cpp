// Nearest and bilinear upsampling on cuda:0 against the CPU kernels: scales 1 to 4, odd
// sizes, every floating dtype, outputs poisoned first, and the gradient through autograd.
#include <catch2/catch.hpp>

#include "ops/upsample_kernels.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

TEST_CASE("cuda upsample equals the CPU's, forward and backward", "[cuda][ops][upsample]") {
  HG_REQUIRE_CUDA();
  uint64_t seed = 90;
  for (UpsampleMode mode : {UpsampleMode::nearest, UpsampleMode::bilinear}) {
    for (int64_t scale : {1, 2, 3, 4}) {
      for (DType dt : test::kFloatingDtypes) {
        INFO((mode == UpsampleMode::nearest ? "nearest" : "bilinear") << " x" << scale << " " << dtype_name(dt));
        const Shape xs{2, 5, 3, 3}, ys{2, 5 * scale, 3 * scale, 3};
        const Tensor x = test::random_cpu(xs, dt, ++seed);
        Tensor y = empty(ys, {dt, Device::cpu()});
        upsample_stub(Device::cpu(), x, y, scale, mode);
        Tensor yc = test::poisoned(ys, dt, kCuda);
        upsample_stub(kCuda, x.to(kCuda), yc, scale, mode);
        if (mode == UpsampleMode::nearest) test::require_equal(yc, y);
        else test::require_close(yc, y);

        const Tensor gy = test::random_cpu(ys, dt, ++seed);
        Tensor gx = empty(xs, {dt, Device::cpu()});
        upsample_backward_stub(Device::cpu(), gy, gx, scale, mode);
        Tensor gxc = test::poisoned(xs, dt, kCuda);
        upsample_backward_stub(kCuda, gy.to(kCuda), gxc, scale, mode);
        test::require_close(gxc, gx);
      }
    }
  }
}

TEST_CASE("upsample on cuda through autograd equals the CPU", "[cuda][ops][upsample]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::kFloatingDtypes) {
    for (UpsampleMode mode : {UpsampleMode::nearest, UpsampleMode::bilinear}) {
      INFO(dtype_name(dt) << (mode == UpsampleMode::nearest ? " nearest" : " bilinear"));
      const Tensor x0 = test::random_cpu({1, 7, 6, 4}, dt, 95);
      Tensor out[2], gx[2];
      for (int d = 0; d < 2; ++d) {
        const Device dev = d == 0 ? Device::cpu() : kCuda;
        Tensor x = x0.to(dev).detach();
        x.set_requires_grad();
        out[d] = upsample(x, 2, mode);
        out[d].backward(test::random_cpu(out[d].shape(), dt, 96).to(dev));
        gx[d] = x.grad();
      }
      REQUIRE(out[1].device() == kCuda);
      test::require_close(out[1], out[0]);
      test::require_close(gx[1], gx[0]);
    }
  }
}
