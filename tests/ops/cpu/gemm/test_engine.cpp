// The CPU GEMM engine (ops/cpu/gemm) driven directly: f32/f16/bf16/f64 products on odd,
// strided and tile-spanning shapes against an f64 reference with the f32-accumulation
// bound, the fused epilogue (alpha, bias, ReLU, one rounding, f16 overflow to inf),
// subnormal inputs, and bitwise independence of the thread count.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/ops/cpu/gemm/reference.h"

using namespace hg;
using namespace hg::cpu;

namespace {

using namespace hg::test_gemm;

struct Shape3 {
  int64_t M, N, K;
};

// Around and past the register tile (6 x 16) and the blocks (KC 256, MC 144, NC 512).
const Shape3 kShapes[] = {{1, 1, 1},   {7, 5, 3},     {6, 16, 8},  {13, 17, 300},
                          {150, 33, 257}, {5, 530, 20}, {145, 49, 513}};

}  // namespace

TEST_CASE("gemm engine: f32, f16, bf16 and f64 products equal f64 within the f32-accumulation bound",
          "[gemm][numerics]") {
  uint64_t seed = 1;
  for (const Shape3& s : kShapes)
    for (bool a_rows : {true, false})
      for (bool b_rows : {true, false}) {
        INFO("M " << s.M << " N " << s.N << " K " << s.K << " A row-major " << a_rows << " B^T row-major " << b_rows);
        seed += 8;
        check_product(random_operand<float>(s.M, s.K, a_rows, seed), random_operand<float>(s.N, s.K, b_rows, seed + 1),
                      {}, 1.0, false);
        check_product(random_operand<half>(s.M, s.K, a_rows, seed + 2), random_operand<half>(s.N, s.K, b_rows, seed + 3),
                      {}, 1.0, false);
        check_product(random_operand<bfloat16>(s.M, s.K, a_rows, seed + 4),
                      random_operand<bfloat16>(s.N, s.K, b_rows, seed + 5), {}, 1.0, false);
        check_product(random_operand<double>(s.M, s.K, a_rows, seed + 6),
                      random_operand<double>(s.N, s.K, b_rows, seed + 7), {}, 1.0, false);
      }
}

TEST_CASE("gemm engine: general strides (neither unit) read every element", "[gemm]") {
  // 9 x 11 and 21 x 11 views with row strides 2, 3 and column strides 23, 70 into larger
  // buffers of f16: both the A and the B packing take their general paths.
  Operand<half> a{9, 11, 2, 23, std::vector<half>(9 * 2 + 11 * 23)}, b{21, 11, 3, 70, std::vector<half>(21 * 3 + 11 * 70)};
  std::mt19937_64 g(3);
  std::normal_distribution<double> d;
  for (half& v : a.data) v = half(d(g));
  for (half& v : b.data) v = half(d(g));
  check_product(a, b, {}, 1.0, false);
  check_product(a, random_operand<half>(21, 11, true, 4), {}, 1.0, false);
}

TEST_CASE("gemm engine: the epilogue adds alpha, bias and ReLU in f32 and rounds once", "[gemm][numerics]") {
  std::vector<double> bias;
  for (int j = 0; j < 37; ++j) bias.push_back(0.25 * (j % 7) - 0.75);
  check_product(random_operand<float>(23, 40, true, 5), random_operand<float>(37, 40, false, 6), bias, -1.5, true);
  check_product(random_operand<half>(23, 40, true, 7), random_operand<half>(37, 40, true, 8), bias, 0.5, true);
  check_product(random_operand<bfloat16>(23, 40, false, 9), random_operand<bfloat16>(37, 40, true, 10), bias, 2.0,
                false);

  // One rounding: 1024 + 0.25 is not an f16, but 1024 + 0.25 - 1024 summed in f32 is 0.25.
  const Operand<half> x{1, 2, 2, 1, {half(1024.0f), half(0.25f)}}, w{1, 2, 2, 1, {half(1.0f), half(1.0f)}};
  half out{};
  const float b = -1024.0f;
  gemm::run<float>(1, 1, 2, x.source(), w.source(), gemm::Output{&out, DType::f16, 1, 1, 0, 0, 1, 1},
                   gemm::Epilogue<float>{1.0f, &b, false});
  CHECK(static_cast<float>(out) == 0.25f);
}

TEST_CASE("gemm engine: f16 sums overflow only on the rounded output; subnormal inputs are exact", "[gemm][numerics]") {
  auto run1 = [](std::vector<half> a, std::vector<half> b) {
    const int64_t K = static_cast<int64_t>(a.size());
    const Operand<half> A{1, K, K, 1, std::move(a)}, B{1, K, K, 1, std::move(b)};
    half out{};
    gemm::run<float>(1, 1, K, A.source(), B.source(), gemm::Output{&out, DType::f16, 1, 1, 0, 0, 1, 1},
                     gemm::Epilogue<float>{});
    return static_cast<double>(static_cast<float>(out));
  };
  // 300*300 - 300*300 + 2: the partial sum 90000 exceeds 65504, the result does not.
  CHECK(run1({half(300.f), half(300.f), half(2.f)}, {half(300.f), half(-300.f), half(1.f)}) == 2.0);
  CHECK(std::isinf(run1({half(300.f), half(300.f)}, {half(300.f), half(300.f)})));
  // 2^-24 (the smallest f16 subnormal) * 2^15 = 2^-9, and 3 * 2^-20 (subnormal) * 2^8 = 3 * 2^-12.
  CHECK(run1({half(0x1p-24f)}, {half(0x1p15f)}) == 0x1p-9);
  CHECK(run1({half(3 * 0x1p-20f)}, {half(0x1p8f)}) == 3 * 0x1p-12);
  // A product below f16's range rounds to its nearest subnormal: 2^-14 * 2^-11 = 2^-25, a tie, to 0;
  // 3 * 2^-26 rounds to 2^-24.
  CHECK(run1({half(0x1p-14f)}, {half(0x1p-11f)}) == 0.0);
  CHECK(run1({half(0x1p-14f)}, {half(3 * 0x1p-12f)}) == 0x1p-24);
}

TEST_CASE("gemm engine: results are bitwise the same on 1 and 2 threads", "[gemm][determinism]") {
  for (const Shape3& s : {Shape3{150, 33, 600}, Shape3{5, 530, 300}, Shape3{300, 300, 64}}) {
    const auto a = random_operand<float>(s.M, s.K, true, 11), b = random_operand<float>(s.N, s.K, false, 12);
    std::vector<float> one(static_cast<size_t>(s.M * s.N)), two(one.size());
    for (auto [threads, out] : {std::pair{1, &one}, std::pair{2, &two}})
      gemm::run<float>(s.M, s.N, s.K, a.source(), b.source(),
                       gemm::Output{out->data(), DType::f32, 1, s.M, 0, 0, s.N, 1}, gemm::Epilogue<float>{}, threads);
    CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  }
}
