// Slow paths said once (cuda/kernel_log.h, cuda/operand_alignment.h) and the kernel log a
// benchmark row uses to say which kernel ran: host checks, then bmm/linear on cuda:0.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "cuda/kernel_log.h"
#include "cuda/operand_alignment.h"
#include "ops/matmul.h"
#include "ops/matmul_kernels.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using Catch::Matchers::Contains;

namespace {
bool noted(const std::string& entry) {
  const auto all = cuda::slow_paths_noted();
  return std::find(all.begin(), all.end(), entry) != all.end();
}
}  // namespace

TEST_CASE("a slow path is said once per place and reason", "[cuda][kernel-log]") {
  REQUIRE(cuda::note_slow_path("test_where", "test reason"));
  REQUIRE_FALSE(cuda::note_slow_path("test_where", "test reason"));
  REQUIRE(cuda::note_slow_path("test_where", "another reason"));
  REQUIRE(noted("test_where: test reason"));
  REQUIRE(noted("test_where: another reason"));
}

TEST_CASE("operand_slow_path: 16-byte copies need an aligned start and aligned line strides", "[cuda][kernel-log]") {
  const uintptr_t p = 0x10000;
  REQUIRE(cuda::operand_slow_path(p, 2, 64 * 64, 64, 64, 1, 64) == nullptr);      // K-contiguous rows
  REQUIRE(cuda::operand_slow_path(p, 2, 64 * 64, 1, 64, 64, 64) == nullptr);      // M-contiguous lines
  REQUIRE_THAT(cuda::operand_slow_path(p + 2, 2, 0, 64, 64, 1, 64), Contains("not 16-byte aligned"));
  REQUIRE_THAT(cuda::operand_slow_path(p, 2, 0, 60, 64, 1, 60), Contains("not 16-byte aligned"));  // 120-byte rows
  REQUIRE_THAT(cuda::operand_slow_path(p, 2, 36, 64, 64, 1, 64), Contains("not 16-byte aligned"));  // batch stride
  REQUIRE_THAT(cuda::operand_slow_path(p, 4, 0, 64, 64, 2, 32), Contains("neither"));
  REQUIRE(cuda::operand_slow_path(p, 4, 0, 3, 1, 1, 60) == nullptr);  // one row: its stride is never used
}

TEST_CASE("bmm and linear say when they take element-by-element loads, and the log names the kernel",
          "[cuda][emu][kernel-log]") {
  HG_REQUIRE_CUDA();
  const Device d = test::kCuda;
  const Tensor wide = test::random_cpu({70, 66}, DType::f16, 5), w = test::random_cpu({40, 64}, DType::f16, 6);
  // Rows of 66 halves (132 bytes) starting one element in: neither aligned.
  const Tensor x = wide.narrow(1, 1, 64);
  std::string ran;
  {
    // The stub itself, so that the view reaches the kernel as it is.
    const Tensor x_dev = wide.to(d).narrow(1, 1, 64), got = test::poisoned({70, 40}, DType::f16, d);
    const cuda::KernelLog log;
    linear_stub(d, x_dev, w.to(d), Tensor(), got);
    ran = log.summary();
    test::require_close(got.to(Device::cpu()), linear(x, w));
  }
  REQUIRE_THAT(ran, Contains("linear_tc (mma.sync"));
  REQUIRE(noted("linear_tc: operand rows are not 16-byte aligned: element-by-element loads"));
  {
    const cuda::KernelLog log;
    const Tensor a = test::random_cpu({1, 64, 64}, DType::bf16, 7).to(d);
    const Tensor out = empty({1, 64, 64}, {DType::bf16, d});
    bmm_stub(d, a, a, out);
    REQUIRE(log.summary() == "bmm_tc (mma.sync 64x64)");
    {
      const cuda::KernelLog inner;
      bmm_stub(d, a, a, out);
      REQUIRE(inner.names().size() == 1);
    }
    REQUIRE(log.names().size() == 1);  // the inner log took the second launch
  }
}
