// Split-K and the narrow tile of the mma.sync engine (cuda/gemm_plan.h) on cuda:0: conv
// weight gradients and forwards at the U-Net's channel counts (16/32/64, 3x3) and a bmm,
// with a small K so the emulation runs them quickly; split against unsplit against the CPU,
// two split runs bit-identical, and the kernel log showing which path ran. The split is
// forced (kernel_settings) except in the case that lets the rule choose at 132 SMs.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "cuda/kernel_log.h"
#include "cuda/kernel_settings.h"
#include "ops/conv2d_kernels.h"
#include "ops/matmul_kernels.h"
#include "tests/cuda/emulated_sms.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using Catch::Matchers::Contains;
using hg::test::kCuda;

namespace {

const Conv2dOptions k3x3{{1, 1}, {1, 1}, {1, 1}, 1};

// The weight gradient of a 3x3 conv cin -> cout on x [n, hw, hw, cin] on cuda:0, and the
// kernels that ran.
Tensor wgrad(const Tensor& gy, const Tensor& x, int64_t cin, int64_t cout, std::string* ran) {
  Tensor gw = test::poisoned({cout, 3, 3, cin}, x.dtype(), kCuda);
  const cuda::KernelLog log;
  conv2d_wgrad_stub(kCuda, gy, x, gw, k3x3);
  *ran = log.summary();
  return gw.to(Device::cpu());
}

Tensor cpu_wgrad(const Tensor& gy, const Tensor& x, int64_t cin, int64_t cout) {
  Tensor gw = empty({cout, 3, 3, cin}, {x.dtype(), Device::cpu()});
  conv2d_wgrad_stub(Device::cpu(), gy, x, gw, k3x3);
  return gw;
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.numel() == y.numel() && std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * dtype_size(x.dtype())) == 0;
}

}  // namespace

TEST_CASE("cuda conv2d weight gradient split over K equals the unsplit one and the CPU's, bit-identical run to run",
          "[cuda][splitk][conv2d]") {
  HG_REQUIRE_CUDA();
  struct Case {
    int64_t cin, cout;
  };
  // 2 images of 6 x 6: K = 72 pixels, three k-steps of 32 (16-bit) or five of 16 (f32).
  const Case cases[] = {{16, 32}, {32, 16}, {64, 64}};
  uint64_t seed = 700;
  for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
    for (const Case& c : cases) {
      INFO(dtype_name(dt) << " cin " << c.cin << " cout " << c.cout);
      const Tensor x = test::random_cpu({2, 6, 6, c.cin}, dt, ++seed), gy = test::random_cpu({2, 6, 6, c.cout}, dt, ++seed);
      const Tensor xd = x.to(kCuda), gyd = gy.to(kCuda);
      std::string ran1, ran2, ran0;
      Tensor split1, split2, unsplit;
      {
        const cuda::ScopedSplitK split(3);
        split1 = wgrad(gyd, xd, c.cin, c.cout, &ran1);
        split2 = wgrad(gyd, xd, c.cin, c.cout, &ran2);
      }
      {
        const cuda::ScopedSplitK split(1);
        unsplit = wgrad(gyd, xd, c.cin, c.cout, &ran0);
      }
      CHECK_THAT(ran1, Contains("split-K") && Contains("split-K reduction"));
      CHECK_THAT(ran0, !Contains("split-K"));
      REQUIRE(bit_identical(split1, split2));
      const Tensor want = cpu_wgrad(gy, x, c.cin, c.cout);
      test::require_close(split1, want);
      test::require_close(unsplit, want);
    }
  }
}

TEST_CASE("cuda conv2d weight gradient at 132 SMs: the rule splits a deep K by itself", "[cuda][splitk][conv2d]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSms sms(132);
  // cin 16 -> cout 16: M = 16, N = 144 (3 small tiles), K = 2 x 32 x 32 = 2048 pixels: the
  // rule gives min(ceil(132 / 3), 2048 / 1024) = 2 chunks (on a real GPU, whatever its SMs say).
  const Tensor x = test::random_cpu({2, 32, 32, 16}, DType::f16, 801), gy = test::random_cpu({2, 32, 32, 16}, DType::f16, 802);
  std::string ran;
  const Tensor got = wgrad(gy.to(kCuda), x.to(kCuda), 16, 16, &ran);
  CHECK_THAT(ran, Contains("mma.sync 64x64, split-K") && Contains("split-K reduction"));
  test::require_close(got, cpu_wgrad(gy, x, 16, 16));
}

TEST_CASE("cuda conv2d forward with 16 or 32 output channels runs the narrow 64x32 tile", "[cuda][splitk][conv2d]") {
  HG_REQUIRE_CUDA();
  for (int64_t cout : {16, 32}) {
    INFO("cout " << cout);
    const Tensor x = test::random_cpu({1, 8, 8, 16}, DType::bf16, 900 + cout), w = test::random_cpu({cout, 3, 3, 16}, DType::bf16, 950 + cout);
    Tensor y = test::poisoned({1, 8, 8, cout}, DType::bf16, kCuda), want = empty({1, 8, 8, cout}, {DType::bf16, Device::cpu()});
    std::string ran;
    {
      const cuda::KernelLog log;
      conv2d_forward_stub(kCuda, x.to(kCuda), w.to(kCuda), Tensor(), y, k3x3);
      ran = log.summary();
    }
    conv2d_forward_stub(Device::cpu(), x, w, Tensor(), want, k3x3);
    CHECK_THAT(ran, Contains("mma.sync 64x32"));
    test::require_close(y, want);
  }
}

TEST_CASE("cuda bmm split over K on the small and the narrow tile equals the CPU's, bit-identical run to run",
          "[cuda][splitk][matmul]") {
  HG_REQUIRE_CUDA();
  // A linear layer's weight gradient shape: few outputs (48 x 40 and 40 x 24), K = 160.
  for (int64_t N : {40, 24}) {
    INFO("N " << N);
    const Tensor a = test::random_cpu({1, 48, 160}, DType::f32, 1000 + N), b = test::random_cpu({1, 160, N}, DType::f32, 1010 + N);
    const cuda::ScopedSplitK split(4);
    Tensor got1 = test::poisoned({1, 48, N}, DType::f32, kCuda), got2 = test::poisoned({1, 48, N}, DType::f32, kCuda);
    std::string ran;
    {
      const cuda::KernelLog log;
      bmm_stub(kCuda, a.to(kCuda), b.to(kCuda), got1);
      ran = log.summary();
    }
    bmm_stub(kCuda, a.to(kCuda), b.to(kCuda), got2);
    CHECK_THAT(ran, Contains(N <= 32 ? "mma.sync 64x32, split-K" : "mma.sync 64x64, split-K"));
    REQUIRE(bit_identical(got1.to(Device::cpu()), got2.to(Device::cpu())));
    Tensor want = empty({1, 48, N}, {DType::f32, Device::cpu()});
    bmm_stub(Device::cpu(), a, b, want);
    test::require_close(got1, want);
  }
}
