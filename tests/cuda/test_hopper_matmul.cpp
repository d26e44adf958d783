// bmm and linear through the Hopper path (cuda/hopper_matmul.h) on an sm_90: on a real H100/
// H200, or on the emulation's sm_90 model, where the kernel's wgmma, TMA and mbarrier run on
// the CPU. The plan, the self-check on first use, the copies and the launch, end to end,
// against the CPU's kernels; the kernel log says the Hopper kernel is what ran.
#include <catch2/catch.hpp>

#include <string>

#include "cuda/hopper_gemm.h"
#include "cuda/kernel_log.h"
#include "ops/matmul_kernels.h"
#include "tests/cuda/emulated_sm90.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using Catch::Matchers::Contains;
using hg::test::kCuda;

namespace {

Tensor cpu_bmm(const Tensor& a, const Tensor& b) {
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, {a.dtype(), Device::cpu()});
  bmm_stub(Device::cpu(), a, b, out);
  return out;
}

}  // namespace

TEST_CASE("cuda bmm on an sm_90 runs the Hopper kernel and equals the CPU's", "[cuda][hopper][matmul]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  struct Case {
    int64_t B, M, K, N;
    bool b_k_contiguous, broadcast_b;
  };
  // 256 x 256 outputs and more: the plan copies an operand only for products that large.
  // K = 1000: 16 k-blocks go round the 6-stage ring more than twice.
  const Case cases[] = {{2, 256, 192, 320, true, false},
                        {1, 300, 136, 264, false, false},
                        {3, 256, 128, 256, false, true},
                        {1, 128, 1000, 192, true, false}};
  uint64_t seed = 40;
  for (const Case& c : cases) {
    for (DType dt : {DType::f16, DType::bf16}) {
      INFO(dtype_name(dt) << " B=" << c.B << " M=" << c.M << " K=" << c.K << " N=" << c.N
                          << (c.b_k_contiguous ? " B K-contiguous" : " B row-major") << (c.broadcast_b ? ", broadcast" : ""));
      const int64_t bb = c.broadcast_b ? 1 : c.B;
      const Tensor a = test::random_cpu({c.B, c.M, c.K}, dt, ++seed);
      // b[z, k, n]: either a row-major [K, N] matrix or the transpose of a K-contiguous [N, K] one.
      const Tensor b = c.b_k_contiguous ? test::random_cpu({bb, c.N, c.K}, dt, ++seed).transpose(1, 2)
                                        : test::random_cpu({bb, c.K, c.N}, dt, ++seed);
      const Tensor b_full = b.expand({c.B, c.K, c.N});
      Tensor b_dev = b.to(kCuda);
      if (c.b_k_contiguous) b_dev = b.transpose(1, 2).contiguous().to(kCuda).transpose(1, 2);
      Tensor got = test::poisoned({c.B, c.M, c.N}, dt, kCuda);
      std::string ran;
      {
        const cuda::KernelLog log;
        bmm_stub(kCuda, a.to(kCuda), b_dev.expand({c.B, c.K, c.N}), got);
        ran = log.summary();
      }
      INFO("kernels: " << ran);
      REQUIRE_THAT(ran, Contains("hopper_gemm"));
      test::require_close(got, cpu_bmm(a, b_full));
    }
  }
}

TEST_CASE("cuda linear on an sm_90 fuses the bias into the Hopper kernel", "[cuda][hopper][matmul][linear]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  for (DType dt : {DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    const int64_t M = 200, K = 264, N = 136;
    const Tensor x = test::random_cpu({M, K}, dt, 5), w = test::random_cpu({N, K}, dt, 6), bias = test::random_cpu({N}, dt, 7);
    Tensor want = empty({M, N}, {dt, Device::cpu()});
    linear_stub(Device::cpu(), x, w, bias, want);
    Tensor got = test::poisoned({M, N}, dt, kCuda);
    std::string ran;
    {
      const cuda::KernelLog log;
      linear_stub(kCuda, x.to(kCuda), w.to(kCuda), bias.to(kCuda), got);
      ran = log.summary();
    }
    INFO("kernels: " << ran);
    REQUIRE(ran == "hopper_gemm");
    test::require_close(got, want);
  }
}
