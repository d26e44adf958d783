// bmm and linear through the Hopper path (cuda/hopper_matmul.h) on an sm_90: on a real H100/
// H200, or on the emulation's sm_90 model, where the kernel's wgmma, TMA and mbarrier run on
// the CPU. The plan, the self-check on first use, the copies and the launch, end to end,
// against the CPU's kernels; the kernel log says the Hopper kernel is what ran.
#include <catch2/catch.hpp>

#include <string>

#include "cuda/cuda_api.h"
#include "cuda/hopper_gemm.h"
#include "cuda/kernel_log.h"
#include "ops/matmul_kernels.h"
#include "tests/cuda/emulated_sm90.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using Catch::Matchers::Contains;
using hg::test::cpu_bmm;
using hg::test::kCuda;

namespace {

// The Hopper kernel's name in the kernel log for a product of B x M x N outputs on cuda:0.
std::string hopper_kernel(int64_t B, int64_t M, int64_t N, bool a_m_major, bool b_n_major, bool tma_stores) {
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  return "hopper_gemm (128x" + std::to_string(cuda::hopper_tile_n(B, M, N, prop.multiProcessorCount)) +
         (a_m_major ? ", A M-major" : ", A K-major") + (b_n_major ? ", B N-major, " : ", B K-major, ") +
         (tma_stores ? "TMA" : "direct") + " stores)";
}

// The first Hopper product of each dtype on a device runs the kernel's self-check (its own
// launches); after this, a product launches only its own kernels.
void run_self_checks() {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor out = empty({1, 128, 128}, {dt, kCuda});
    bmm_stub(kCuda, test::random_cpu({1, 128, 128}, dt, 1).to(kCuda), test::random_cpu({1, 128, 128}, dt, 2).to(kCuda), out);
  }
}

}  // namespace

TEST_CASE("cuda bmm on an sm_90 runs the Hopper kernel and equals the CPU's", "[cuda][hopper][matmul]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  // How b is laid out in memory: K-contiguous (a transposed [N, K] matrix), row-major (N
  // contiguous), or every other column of a row-major [K, 2N] matrix (neither: copied).
  enum class Layout { k_contiguous, row_major, strided };
  struct Case {
    int64_t B, M, K, N;
    Layout layout;
    bool broadcast_b;
    bool a_m_contiguous = false;  // a [B, M, K] as the transpose of a row-major [B, K, M]
  };
  // The plan copies an operand only for outputs of 256 x 256 and more. K = 1000: 16 k-blocks
  // go round the 6-stage ring more than twice.
  const Case cases[] = {{2, 256, 192, 320, Layout::k_contiguous, false}, {1, 300, 136, 264, Layout::row_major, false},
                        {3, 256, 128, 256, Layout::row_major, true},     {1, 128, 1000, 192, Layout::k_contiguous, false},
                        {1, 100, 520, 136, Layout::row_major, false},    {2, 256, 128, 256, Layout::strided, false},
                        {2, 192, 320, 256, Layout::k_contiguous, false, true},
                        {1, 136, 200, 320, Layout::row_major, false, true}};
  run_self_checks();
  uint64_t seed = 40;
  for (const Case& c : cases) {
    for (DType dt : {DType::f16, DType::bf16}) {
      INFO(dtype_name(dt) << " B=" << c.B << " M=" << c.M << " K=" << c.K << " N=" << c.N << " layout "
                          << static_cast<int>(c.layout) << (c.broadcast_b ? ", broadcast" : "")
                          << (c.a_m_contiguous ? ", A M-contiguous" : ""));
      const int64_t bb = c.broadcast_b ? 1 : c.B;
      const Tensor a = c.a_m_contiguous ? test::random_cpu({c.B, c.K, c.M}, dt, ++seed).transpose(1, 2)
                                        : test::random_cpu({c.B, c.M, c.K}, dt, ++seed);
      // a_dev keeps a's layout (to() of a transposed view would make it contiguous).
      const Tensor a_dev = c.a_m_contiguous ? a.transpose(1, 2).to(kCuda).transpose(1, 2) : a.to(kCuda);
      Tensor b_dev;  // b[z, k, n] on the device, laid out as the case says
      switch (c.layout) {
        case Layout::k_contiguous: b_dev = test::random_cpu({bb, c.N, c.K}, dt, ++seed).to(kCuda).transpose(1, 2); break;
        case Layout::row_major: b_dev = test::random_cpu({bb, c.K, c.N}, dt, ++seed).to(kCuda); break;
        case Layout::strided: b_dev = test::random_cpu({bb, c.K, 2 * c.N}, dt, ++seed).to(kCuda).slice(2, 0, 2 * c.N, 2); break;
      }
      const Tensor b_full = b_dev.to(Device::cpu()).expand({c.B, c.K, c.N});
      Tensor got = test::poisoned({c.B, c.M, c.N}, dt, kCuda);
      std::string ran;
      {
        const cuda::KernelLog log;
        bmm_stub(kCuda, a_dev, b_dev.expand({c.B, c.K, c.N}), got);
        ran = log.summary();
      }
      // Every output row here is a multiple of 16 bytes: TMA stores the tiles.
      const std::string gemm = hopper_kernel(c.B, c.M, c.N, c.a_m_contiguous, c.layout == Layout::row_major, true);
      REQUIRE(ran == (c.layout == Layout::strided ? "transpose_k_major + " + gemm : gemm));
      test::require_close(got, cpu_bmm(a, b_full));
    }
  }
}

TEST_CASE("cuda linear on an sm_90 fuses the bias into the Hopper kernel", "[cuda][hopper][matmul][linear]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  run_self_checks();
  struct Case {
    int64_t N;
    bool w_n_contiguous;          // w [N, K] as the transpose of a row-major [K, N] matrix
    bool x_m_contiguous = false;  // x [M, K] as the transpose of a row-major [K, M] matrix
  };
  // 136 outputs per row are 272 bytes (f16/bf16): TMA stores the tile; 100 are 200 bytes,
  // which it cannot, so the threads store directly.
  const Case cases[] = {{136, false}, {136, true}, {100, false}, {136, true, true}};
  const int64_t M = 200, K = 264;
  for (const Case& c : cases) {
    for (DType dt : {DType::f16, DType::bf16}) {
      INFO(dtype_name(dt) << " N=" << c.N << (c.w_n_contiguous ? " w N-contiguous" : "")
                          << (c.x_m_contiguous ? " x M-contiguous" : ""));
      const Tensor x = c.x_m_contiguous ? test::random_cpu({K, M}, dt, 5).transpose(0, 1) : test::random_cpu({M, K}, dt, 5);
      const Tensor bias = test::random_cpu({c.N}, dt, 7);
      const Tensor w = c.w_n_contiguous ? test::random_cpu({K, c.N}, dt, 6).transpose(0, 1) : test::random_cpu({c.N, K}, dt, 6);
      Tensor want = empty({M, c.N}, {dt, Device::cpu()});
      linear_stub(Device::cpu(), x, w, bias, want);
      const Tensor w_dev = c.w_n_contiguous ? w.transpose(0, 1).to(kCuda).transpose(0, 1) : w.to(kCuda);
      Tensor got = test::poisoned({M, c.N}, dt, kCuda);
      std::string ran;
      {
        const cuda::KernelLog log;
        const Tensor x_dev = c.x_m_contiguous ? x.transpose(0, 1).to(kCuda).transpose(0, 1) : x.to(kCuda);
        linear_stub(kCuda, x_dev, w_dev, bias.to(kCuda), got);
        ran = log.summary();
      }
      REQUIRE(ran == hopper_kernel(1, M, c.N, c.x_m_contiguous, c.w_n_contiguous, c.N * 2 % 16 == 0));
      test::require_close(got, want);
    }
  }
}
