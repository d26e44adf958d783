// The convolution sources' packers against the im2col definition written out here: the
// weight gradient's columns (ConvTaps::pack: taps as rows, pixels along k, k-major panels)
// must hold x[n, p*stride - pad + r*dil, q*stride - pad + s*dil, c0 + c], zero outside the
// image and past the last row, for any row block, k block, pixel offset and panel width, on
// the vector path (runs of whole 8-value vectors) and the scalar one.
#include <catch2/catch.hpp>
#include <vector>

#include "ops/cpu/gemm/sources.h"

using namespace hg::cpu::gemm;

namespace {

template <class T>
void check_pack(int64_t C, int64_t c0, int64_t Cg, int64_t stride, int64_t pad, int64_t dil) {
  const int64_t N = 2, H = 7, W = 9, R = 3, S = 3;
  const int64_t P = (H + 2 * pad - dil * (R - 1) - 1) / stride + 1, Q = (W + 2 * pad - dil * (S - 1) - 1) / stride + 1;
  std::vector<T> x(static_cast<size_t>(N * H * W * C));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(1 + i);  // every value distinct, none zero
  ConvTaps<T> taps{{x.data(), H, W, C, c0, Cg, R, S, P, Q, stride, -pad, dil, stride, -pad, dil}};
  const int64_t RSC = R * S * Cg, pixels = N * P * Q;
  // Element (tap t, pixel m) of im2col(x)^T, from the definition.
  auto want = [&](int64_t t, int64_t m) -> T {
    const int64_t n = m / (P * Q), p = (m / Q) % P, q = m % Q;
    const int64_t r = t / (S * Cg), s = (t / Cg) % S, c = t % Cg;
    const int64_t h = p * stride - pad + r * dil, w = q * stride - pad + s * dil;
    if (h < 0 || h >= H || w < 0 || w >= W) return T(0);
    return x[static_cast<size_t>(((n * H + h) * W + w) * C + c0 + c)];
  };
  for (int64_t Rp : {int64_t{6}, int64_t{16}, int64_t{24}, int64_t{48}})
    for (int64_t base : {int64_t{0}, int64_t{5}})
      for (auto [r0, rn] : {std::pair<int64_t, int64_t>{0, RSC}, {3, std::min<int64_t>(RSC - 3, 21)}, {8, RSC - 8}})
        for (auto [k0, kc] : {std::pair<int64_t, int64_t>{0, pixels - base}, {2, std::min<int64_t>(pixels - base - 2, 37)}}) {
          INFO("panel " << Rp << " m_base " << base << " rows " << r0 << "+" << rn << " k " << k0 << "+" << kc);
          taps.m_base = base;
          const int64_t panels = (rn + Rp - 1) / Rp;
          std::vector<T> dst(static_cast<size_t>(panels * Rp * kc), T(-1));
          taps.pack(dst.data(), r0, rn, k0, kc, Rp);
          int64_t bad = 0;
          for (int64_t i = 0; i < panels * Rp; ++i)
            for (int64_t k = 0; k < kc; ++k) {
              const T expect = i < rn ? want(r0 + i, base + k0 + k) : T(0);
              const T got = dst[static_cast<size_t>((i / Rp) * Rp * kc + k * Rp + i % Rp)];
              if (got != expect && bad++ < 3) FAIL_CHECK("row " << i << " k " << k << " got " << got << " want " << expect);
            }
          CHECK(bad == 0);
        }
}

}  // namespace

TEST_CASE("conv sources: ConvTaps::pack writes im2col(x)^T as k-major panels, zeros outside the image",
          "[conv2d][gemm]") {
  SECTION("f32, all channels, padded (whole-vector runs)") { check_pack<float>(8, 0, 8, 1, 1, 1); }
  SECTION("f32, 16 channels (kernel rows of 48: vectors crossing panels)") { check_pack<float>(16, 0, 16, 1, 1, 1); }
  SECTION("f32, one channel group, strided and dilated") { check_pack<float>(12, 4, 5, 2, 2, 2); }
  SECTION("f64 (the scalar path)") { check_pack<double>(3, 0, 3, 1, 1, 1); }
}
