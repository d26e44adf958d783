// The outer-product driver of the weight gradients (ops/cpu/gemm/outer.h): each outer
// micro-kernel this CPU runs equals the portable chain bit for bit (the AVX-512 ones skip
// visibly where the CPU lacks AVX-512), the driver's product equals f64 within the
// f32-accumulation bound and does not depend on the thread count, ColumnRuns packs as the
// definition says, the kernel choice pads least, and the first-use self-check refuses a
// kernel that is off by a bit.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "framework/cpu/isa.h"
#include "ops/cpu/gemm/outer.h"
#include "ops/cpu/loops.h"
#include "tests/skip.h"

using namespace hg;
using namespace hg::cpu;

namespace {

std::vector<float> normal(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_kernel_bitwise(const gemm::OuterKernel<float>& k) {
  INFO(k.name);
  const int64_t kc = 53, ldc = k.nr + 5;
  const std::vector<float> a = normal(static_cast<size_t>(2 * kc * k.mr), 1), b = normal(static_cast<size_t>(2 * kc * k.nr), 2);
  std::vector<float> want(static_cast<size_t>(k.mr * ldc), -3.0f), got = want;
  for (int blk = 0; blk < 2; ++blk) {  // the second block continues the first's sums
    gemm::outer_tile<float>(k.mr, k.nr, kc, a.data() + blk * kc * k.mr, b.data() + blk * kc * k.nr, want.data(), ldc,
                            blk == 0);
    k.fn(kc, a.data() + blk * kc * k.mr, b.data() + blk * kc * k.nr, got.data(), ldc, blk == 0);
  }
  CHECK(same_bits(want, got));  // the columns past nr (ldc padding) untouched by both
}

}  // namespace

TEST_CASE("gemm outer kernels: the AVX2 ones equal the portable chain bit for bit", "[gemm][isa]") {
  for (const auto* k : gemm::avx2_outer_kernels()) check_kernel_bitwise(*k);
}

TEST_CASE("gemm outer kernels: the AVX-512 ones equal the portable chain bit for bit", "[gemm][isa]") {
  if (static_cast<int>(best_isa()) < static_cast<int>(Isa::avx512))
    HG_SKIP("the AVX-512 outer kernels (8x16, 8x32, 8x48) need AVX-512 F/BW/VL/DQ; this CPU has " + describe());
  for (const auto* k : gemm::avx512_outer_kernels()) check_kernel_bitwise(*k);
  ForceIsa avx512(Isa::avx512);
  CHECK(gemm::outer_kernel_for(8, 576).mr == 8);  // chosen (its self-check passed) on this path
}

TEST_CASE("gemm outer driver: C = A B^T over a long k equals f64, identical at 1 and 2 threads", "[gemm]") {
  // A: M rows, column k contiguous (ColumnRuns, stride lda between columns); B: N x K row-major.
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{13, 50, 300}, {8, 72, 129}, {64, 600, 70}, {5, 3, 0}}) {
    INFO("M " << M << " N " << N << " K " << K);
    const int64_t lda = M + 3;
    const std::vector<float> a = normal(static_cast<size_t>(lda * std::max<int64_t>(K, 1)), 3),
                             b = normal(static_cast<size_t>(N * std::max<int64_t>(K, 1)), 4);
    const gemm::ColumnRuns<float> sa{a.data(), lda};
    const gemm::Matrix<float> sb{b.data(), K, 1};
    const gemm::OuterKernel<float>& kn = gemm::outer_kernel_for(M, N);
    const int64_t ldc = N + 2;
    std::vector<float> c1(static_cast<size_t>(M * ldc), 9.0f), c2 = c1;
    gemm::run_outer<float>(M, N, K, sa, sb, c1.data(), ldc, 1, kn);
    gemm::run_outer<float>(M, N, K, sa, sb, c2.data(), ldc, 2, kn);
    CHECK(same_bits(c1, c2));
    int64_t bad = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        double want = 9.0, mag = 0;  // the columns past N keep what was there
        if (j < N) {
          want = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double v = static_cast<double>(a[static_cast<size_t>(k * lda + i)]) * b[static_cast<size_t>(j * K + k)];
            want += v, mag += std::fabs(v);
          }
        }
        const double got = c1[static_cast<size_t>(i * ldc + j)];
        if (!(std::fabs(got - want) <= (K + 1) * 0x1p-24 * mag) && bad++ < 3)
          FAIL_CHECK("(" << i << ", " << j << ") got " << got << " want " << want);
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("gemm ColumnRuns packs each column's rows into k-major panels, zeros past the last row", "[gemm]") {
  const int64_t rows = 13, cols = 9, ld = 16;
  std::vector<float> src(static_cast<size_t>(ld * cols));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i + 1);
  const gemm::ColumnRuns<float> s{src.data(), ld};
  for (int64_t R : {int64_t{4}, int64_t{8}, int64_t{6}})
    for (auto [r0, rn] : {std::pair<int64_t, int64_t>{0, rows}, {2, 9}}) {
      INFO("R " << R << " rows " << r0 << "+" << rn);
      const int64_t k0 = 2, kc = 5, panels = (rn + R - 1) / R;
      std::vector<float> dst(static_cast<size_t>(panels * R * kc), -1.0f);
      s.pack(dst.data(), r0, rn, k0, kc, R);
      for (int64_t i = 0; i < panels * R; ++i)
        for (int64_t k = 0; k < kc; ++k) {
          const float want = i < rn ? src[static_cast<size_t>((k0 + k) * ld + r0 + i)] : 0.0f;
          CHECK(dst[static_cast<size_t>((i / R) * R * kc + k * R + i % R)] == want);
        }
    }
}

TEST_CASE("gemm outer kernel choice: the tile that pads least, the wider on a tie", "[gemm][isa]") {
  ForceIsa avx2(Isa::avx2);
  CHECK(gemm::outer_kernel_for(8, 64).nr == 16);   // 64 = 4 x 16; 4 x 24 would pad to 72
  CHECK(gemm::outer_kernel_for(8, 72).nr == 24);   // 72 = 3 x 24; 4 x 16 would pad to 80
  CHECK(gemm::outer_kernel_for(16, 48).nr == 24);  // both exact: the wider
  CHECK(gemm::outer_kernel_for(8, 9).nr == 16);    // the first layer's 9 taps: 16 < 24
  CHECK(gemm::outer_kernel_for(8, 9).mr == 4);
}

namespace {

void off_outer(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first) {
  gemm::avx2_outer_kernels().front()->fn(kc, a, b, c, ldc, first);
  c[ldc + 3] = std::nextafter(c[ldc + 3], 1e30f);
}

}  // namespace

TEST_CASE("gemm outer self-check: a kernel one ulp off in one element is refused", "[gemm][isa]") {
  const gemm::OuterKernel<float> off{"one ulp off (test)", 4, 16, off_outer};
  CHECK_FALSE(gemm::outer_self_check(off));
  for (const auto* k : gemm::avx2_outer_kernels()) CHECK(gemm::outer_self_check(*k));
}
