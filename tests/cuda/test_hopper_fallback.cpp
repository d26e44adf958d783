// The Hopper path's choices at an H200's 132 SMs and its fallback, under the emulation's
// sm_90 model: the tile width rule and its forcing knob, products the mma.sync engine
// splits left to it, and a tensor-map encode failure outside the self-check (injected into
// the emulated driver) running the product on mma.sync with one line on stderr.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "cuda/cuda_api.h"
#include "cuda/hopper_gemm.h"
#include "cuda/hopper_matmul.h"
#include "cuda/hopper_self_check.h"
#include "cuda/kernel_log.h"
#include "cuda/kernel_settings.h"
#include "ops/matmul_kernels.h"
#include "tests/cuda/emulated_sm90.h"
#include "tests/cuda/emulated_sms.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"
#if defined(HG_CUDA_EMULATION)
#include "cuda/emu/tma_model.h"
#endif

using namespace hg;
using Catch::Matchers::Contains;
using hg::test::cpu_bmm;
using hg::test::kCuda;

namespace {

// bmm on cuda:0; the kernels that ran in *ran.
Tensor gpu_bmm(const Tensor& a, const Tensor& b, std::string* ran) {
  Tensor out = test::poisoned({a.size(0), a.size(1), b.size(2)}, a.dtype(), kCuda);
  const cuda::KernelLog log;
  bmm_stub(kCuda, a.to(kCuda), b.to(kCuda), out);
  *ran = log.summary();
  return out;
}

// What f() writes on stderr (fd 2), through a temporary file.
template <class F>
std::string stderr_of(F&& f) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  const int saved = dup(2);
  dup2(fileno(tmp), 2);
  try {
    f();
  } catch (...) {
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::fclose(tmp);
    throw;
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  std::rewind(tmp);
  for (int c; (c = std::fgetc(tmp)) != EOF;) text += static_cast<char>(c);
  std::fclose(tmp);
  return text;
}

}  // namespace

TEST_CASE("Hopper bmm at 132 SMs: 128-wide tiles by the rule, 128x256 when forced, deep small products on mma.sync",
          "[cuda][hopper][splitk]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  const test::EmulatedSms sms(132);
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  const Tensor a = test::random_cpu({1, 128, 64}, DType::f16, 61), b = test::random_cpu({1, 64, 264}, DType::f16, 62);
  const Tensor want = cpu_bmm(a, b);
  std::string ran;
  Tensor got = gpu_bmm(a, b, &ran);
  CHECK_THAT(ran, Contains("hopper_gemm (128x128"));  // 2 wide tiles would idle 130 SMs
  test::require_close(got, want);
  {
    const cuda::ScopedHopperTileN wide(256);
    got = gpu_bmm(a, b, &ran);
  }
  CHECK_THAT(ran, Contains("hopper_gemm (128x256"));
  test::require_close(got, want);
  // 64 x 64 outputs over K = 2048: one tile on 132 SMs; mma.sync's split-K takes it.
  const Tensor a2 = test::random_cpu({1, 64, 2048}, DType::f16, 63), b2 = test::random_cpu({1, 2048, 64}, DType::f16, 64);
  got = gpu_bmm(a2, b2, &ran);
  CHECK_THAT(ran, Contains("mma.sync 64x64, split-K") && !Contains("hopper_gemm"));
  test::require_close(got, cpu_bmm(a2, b2));
}

TEST_CASE("a tensor-map encode failure outside the self-check falls back to mma.sync with one warning",
          "[cuda][hopper][fallback]") {
#if !defined(HG_CUDA_EMULATION)
  HG_SKIP("the failure is injected into the emulated driver");
#else
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  const Tensor a = test::random_cpu({1, 128, 64}, DType::bf16, 71), b = test::random_cpu({1, 64, 128}, DType::bf16, 72);
  const Tensor want = cpu_bmm(a, b);
  std::string ran;
  test::require_close(gpu_bmm(a, b, &ran), want);  // passes the self-check (if not done yet) and runs
  REQUIRE_THAT(ran, Contains("hopper_gemm"));
  Tensor got;
  cuda::emu::fail_next_tensor_map_encodes(1);
  const std::string said = stderr_of([&] { got = gpu_bmm(a, b, &ran); });
  cuda::emu::fail_next_tensor_map_encodes(0);
  CHECK_THAT(said, Contains("Hopper GEMM kernel failed on cuda:0 in bf16") && Contains("cuTensorMapEncodeTiled") &&
                       Contains("using the mma.sync kernel"));
  CHECK_THAT(ran, Contains("mma.sync") && !Contains("hopper_gemm"));
  test::require_close(got, want);
  // The path stays off for bf16 on cuda:0, silently; f16 is untouched.
  const std::string again = stderr_of([&] { got = gpu_bmm(a, b, &ran); });
  CHECK(again.find("Hopper") == std::string::npos);
  CHECK_THAT(ran, Contains("mma.sync") && !Contains("hopper_gemm"));
  test::require_close(got, want);
  // Restore the verdict for the tests after this one.
  cuda::hopper_matmul_verdicts().set(0, DType::bf16, true, "");
  gpu_bmm(a, b, &ran);
  CHECK_THAT(ran, Contains("hopper_gemm"));
#endif
}
