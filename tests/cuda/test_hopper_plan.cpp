// plan_hopper_gemm (cuda/hopper_plan.h): which products the Hopper kernel declines, and
// why, decided from shapes, strides and addresses before any copy or HopperGemm exists:
// matrix-vector products, expanded (zero-stride) inputs, small sizes, overlapping or
// unaligned rows. Host code: runs in every CUDA build, GPU or not.
#include <catch2/catch.hpp>

#include <string>

#include "cuda/hopper_plan.h"

using namespace hg;
using cuda::GemmOperandLayout;
using cuda::HopperPlan;
using cuda::plan_hopper_gemm;
using Catch::Matchers::Contains;

namespace {
constexpr uintptr_t kAligned = 0x7f0000001000;

// A contiguous [batches, rows, K] operand.
GemmOperandLayout dense(int64_t batches, int64_t rows, int64_t K, uintptr_t address = kAligned) {
  return {batches, rows, K, rows * K, K, 1, address};
}

// B^T of a row-major b [batches, K, N]: element (n, k) at k * N + n.
GemmOperandLayout row_major_b(int64_t batches, int64_t K, int64_t N) { return {batches, N, K, K * N, 1, N, kAligned}; }
}  // namespace

TEST_CASE("a matrix-vector bmm (b [B, K, 1]) is declined before anything is described", "[cuda][hopper]") {
  // b [4, 512, 1] contiguous: B^T is [4, 1, 512] with row stride 1 < K, the layout that
  // made describe()'s ldb >= K check throw.
  const GemmOperandLayout bt{4, 1, 512, 512, 1, 1, kAligned};
  const HopperPlan p = plan_hopper_gemm(DType::f16, dense(4, 1024, 512), bt, true);
  REQUIRE(p.decline != nullptr);
  REQUIRE_THAT(std::string(p.decline), Contains("N < 64"));
  REQUIRE_FALSE((p.copy_a || p.copy_b));
}

TEST_CASE("small M, N or K and other dtypes are declined with their reason", "[cuda][hopper]") {
  REQUIRE_THAT(std::string(plan_hopper_gemm(DType::f16, dense(1, 63, 128), dense(1, 128, 128), true).decline),
               Contains("M < 64"));
  REQUIRE_THAT(std::string(plan_hopper_gemm(DType::bf16, dense(1, 128, 128), dense(1, 8, 128), true).decline),
               Contains("N < 64"));
  REQUIRE_THAT(std::string(plan_hopper_gemm(DType::f16, dense(1, 128, 32), dense(1, 128, 32), true).decline),
               Contains("K < 64"));
  REQUIRE_THAT(std::string(plan_hopper_gemm(DType::f32, dense(1, 128, 128), dense(1, 128, 128), true).decline),
               Contains("f16 or bf16"));
  REQUIRE_THAT(std::string(plan_hopper_gemm(DType::f16, dense(1, int64_t{1} << 31, 64), dense(1, 64, 64), true).decline),
               Contains("2^31"));
}

TEST_CASE("K- or N-contiguous aligned operands run as they are; other B layouts are copied only when worth it",
          "[cuda][hopper]") {
  // TN (what linear and x @ w.T see): no copies.
  HopperPlan p = plan_hopper_gemm(DType::f16, dense(2, 512, 256), dense(2, 384, 256), true);
  REQUIRE(p.decline == nullptr);
  REQUIRE_FALSE((p.copy_a || p.copy_b || p.b_n_major));
  // NN (a row-major b): read N-major by wgmma's transpose mode, at any size, in linear too.
  for (const bool allow_copies : {true, false}) {
    p = plan_hopper_gemm(DType::bf16, dense(1, 512, 512), row_major_b(1, 512, 512), allow_copies);
    REQUIRE(p.decline == nullptr);
    REQUIRE((!p.copy_a && !p.copy_b && p.b_n_major));
    p = plan_hopper_gemm(DType::f16, dense(1, 128, 512), row_major_b(1, 512, 128), allow_copies);
    REQUIRE((p.decline == nullptr && p.b_n_major));
  }
  REQUIRE(cuda::hopper_operand_readable_mn_major(row_major_b(3, 512, 128)));
  // N = 100: K-steps of 200 bytes, which TMA cannot read N-major either: a copy at 512 x 100...
  const GemmOperandLayout n100 = row_major_b(1, 512, 100);
  REQUIRE_FALSE(cuda::hopper_operand_readable_mn_major(n100));
  p = plan_hopper_gemm(DType::f16, dense(1, 2048, 512), n100, true);
  REQUIRE(p.decline == nullptr);
  REQUIRE((p.copy_b && !p.b_n_major));
  // ...declined when too small to pay for the copy, and in linear, which allows none.
  p = plan_hopper_gemm(DType::f16, dense(1, 128, 512), n100, true);
  REQUIRE_THAT(std::string(p.decline), Contains("too small to pay for a copy"));
  p = plan_hopper_gemm(DType::f16, dense(1, 2048, 512), n100, false);
  REQUIRE_THAT(std::string(p.decline), Contains("weight is neither K- nor N-contiguous"));
  // Neither K- nor N-contiguous (both strides > 1, e.g. every other column of a wider b).
  REQUIRE_FALSE(cuda::hopper_operand_readable_mn_major({1, 256, 256, 0, 2, 512, kAligned}));
  // An M-contiguous A (the transpose of a row-major [K, M] matrix, as in a weight gradient
  // x^T · dy): read M-major, no copy, in linear too.
  const GemmOperandLayout a_t{2, 384, 512, 384 * 512, 1, 384, kAligned};
  for (const bool allow_copies : {true, false}) {
    p = plan_hopper_gemm(DType::f16, a_t, dense(2, 256, 512), allow_copies);
    REQUIRE((p.decline == nullptr && p.a_m_major && !p.copy_a && !p.copy_b && !p.b_n_major));
  }
  p = plan_hopper_gemm(DType::bf16, a_t, row_major_b(2, 512, 256), true);
  REQUIRE((p.decline == nullptr && p.a_m_major && p.b_n_major));
  // M = 100: K-steps of 200 bytes: neither readable, so a copy (large) or a decline (linear).
  const GemmOperandLayout a_t100{1, 100, 512, 0, 1, 100, kAligned};
  REQUIRE_FALSE(cuda::hopper_operand_readable_mn_major(a_t100));
  p = plan_hopper_gemm(DType::f16, a_t100, dense(1, 2048, 512), false);
  REQUIRE_THAT(std::string(p.decline), Contains("input is neither K- nor M-contiguous"));
}

TEST_CASE("expanded (zero-stride) inputs: a shared batch is read as is, overlapping rows are copied",
          "[cuda][hopper]") {
  // b expanded over the batch (batch stride 0): TMA reads batch 0 for every z.
  const GemmOperandLayout shared_b{8, 256, 256, 0, 256, 1, kAligned};
  HopperPlan p = plan_hopper_gemm(DType::f16, dense(8, 256, 256), shared_b, true);
  REQUIRE(p.decline == nullptr);
  REQUIRE_FALSE((p.copy_a || p.copy_b));
  REQUIRE(cuda::hopper_operand_readable(shared_b));
  // a expanded along M (every row the same: row stride 0 < K): copied when big enough...
  const GemmOperandLayout same_rows{1, 512, 256, 256, 0, 1, kAligned};
  REQUIRE_FALSE(cuda::hopper_operand_readable(same_rows));
  p = plan_hopper_gemm(DType::f16, same_rows, dense(1, 512, 256), true);
  REQUIRE(p.decline == nullptr);
  REQUIRE((p.copy_a && !p.copy_b));
  // ...declined when not, and never thrown at.
  p = plan_hopper_gemm(DType::f16, {1, 64, 256, 256, 0, 1, kAligned}, dense(1, 64, 256), true);
  REQUIRE(p.decline != nullptr);
  // b expanded along N (B^T rows 0 apart) in linear: declined by name.
  p = plan_hopper_gemm(DType::f16, dense(1, 256, 256), {1, 256, 256, 0, 0, 1, kAligned}, false);
  REQUIRE_THAT(std::string(p.decline), Contains("weight"));
}

TEST_CASE("unaligned operands: copied when allowed and worth it, declined otherwise", "[cuda][hopper]") {
  // A view starting one f16 element in: 2-byte aligned only.
  const GemmOperandLayout shifted = dense(1, 512, 512, kAligned + 2);
  REQUIRE_FALSE(cuda::hopper_operand_readable(shifted));
  HopperPlan p = plan_hopper_gemm(DType::f16, shifted, dense(1, 512, 512), true);
  REQUIRE((p.decline == nullptr && p.copy_a && !p.copy_b));
  p = plan_hopper_gemm(DType::f16, shifted, dense(1, 512, 512), false);
  REQUIRE_THAT(std::string(p.decline), Contains("input is neither K- nor M-contiguous"));
  // Rows 100 elements (200 bytes) apart: not a multiple of 16 bytes.
  const GemmOperandLayout ld100{1, 256, 96, 256 * 100, 100, 1, kAligned};
  REQUIRE_FALSE(cuda::hopper_operand_readable(ld100));
  // A batch stride that is not a multiple of 8 elements, on a batched operand.
  REQUIRE_FALSE(cuda::hopper_operand_readable({2, 64, 64, 64 * 64 + 4, 64, 1, kAligned}));
  REQUIRE(cuda::hopper_operand_readable({1, 64, 64, 64 * 64 + 4, 64, 1, kAligned}));  // one batch: unused
  // K = 100 is not a multiple of 8: a copy would have 200-byte rows, which TMA cannot read.
  p = plan_hopper_gemm(DType::f16, {1, 512, 100, 512 * 100, 100, 1, kAligned}, row_major_b(1, 100, 512), true);
  REQUIRE(p.decline != nullptr);
  REQUIRE_THAT(std::string(p.decline), Contains("multiple of 8"));
}
