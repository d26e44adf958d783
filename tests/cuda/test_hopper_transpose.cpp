// The Hopper path's B transpose (cuda/hopper_transpose.h) on cuda:0: every element lands at
// its transposed place for ragged shapes (not multiples of the 32 x 32 tile), row-major and
// strided inputs, a broadcast batch, both 16-bit dtypes; other inputs are refused.
#include <catch2/catch.hpp>

#include <vector>

#include "cuda/hopper_transpose.h"
#include "framework/error.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

namespace {

// An integer in [-125, 125] (exact in f16 and bf16) that differs between (k, n) and (n, k),
// so a transposed-twice or untransposed copy cannot pass.
double value(int64_t z, int64_t k, int64_t n) { return static_cast<double>((z * 131 + k * 17 + n * 7) % 251 - 125); }

Tensor pattern(int64_t B, int64_t K, int64_t N, DType dt) {
  std::vector<double> v;
  for (int64_t z = 0; z < B; ++z)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) v.push_back(value(z, k, n));
  return from_vector(v, {B, K, N}, {dt});
}

// t must be [B, N, K] contiguous with t[z, n, k] = value(z mod batches_of_b, k, n).
void check_transposed(const Tensor& t, int64_t B, int64_t K, int64_t N, int64_t b_batches) {
  REQUIRE(t.shape() == Shape{B, N, K});
  REQUIRE(t.is_contiguous());
  const std::vector<double> got = t.to(Device::cpu()).to(f64).to_vector<double>();
  int64_t wrong = 0;
  for (int64_t z = 0; z < B; ++z)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) wrong += got[(z * N + n) * K + k] != value(z % b_batches, k, n);
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("transpose_k_major moves every element of b[z, k, n] to [z, n, k]", "[cuda][hopper]") {
  HG_REQUIRE_CUDA();
  for (const DType dt : {f16, bf16}) {
    INFO(dtype_name(dt));
    {  // row-major, ragged in both tile axes, several batches
      const Tensor b = pattern(3, 70, 45, dt).to(kCuda);
      check_transposed(cuda::transpose_k_major(b), 3, 70, 45, 3);
    }
    {  // a strided view: every other column, an offset row start
      const Tensor b = pattern(2, 33, 80, dt).to(kCuda).slice(2, 0, 80, 2);
      REQUIRE(b.strides()[2] == 2);
      const Tensor t = cuda::transpose_k_major(b);
      const std::vector<double> got = t.to(Device::cpu()).to(f64).to_vector<double>();
      REQUIRE(t.shape() == Shape{2, 40, 33});
      int64_t wrong = 0;
      for (int64_t z = 0; z < 2; ++z)
        for (int64_t n = 0; n < 40; ++n)
          for (int64_t k = 0; k < 33; ++k) wrong += got[(z * 40 + n) * 33 + k] != value(z, k, 2 * n);
      CHECK(wrong == 0);
    }
    {  // one matrix shared by every batch entry (batch stride 0)
      const Tensor b = pattern(1, 64, 96, dt).to(kCuda).expand({4, 64, 96});
      check_transposed(cuda::transpose_k_major(b), 4, 64, 96, 1);
    }
  }
}

TEST_CASE("transpose_k_major refuses what it cannot move", "[cuda][hopper]") {
  HG_REQUIRE_CUDA();
  CHECK_THROWS_AS(cuda::transpose_k_major(zeros({2, 8, 8}, {f32, kCuda})), Error);
  CHECK_THROWS_AS(cuda::transpose_k_major(zeros({8, 8}, {f16, kCuda})), Error);
  CHECK_THROWS_AS(cuda::transpose_k_major(zeros({2, 8, 8}, {f16})), Error);
}
