// Host unit tests of the implicit-GEMM convolution maps (cuda/conv2d_indexing.h): the
// forward's im2col map and the input gradient's gather map name exactly the products of
// the convolution's definition, enumerated here by its seven nested loops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <tuple>
#include <vector>

#include "cuda/conv2d_indexing.h"

using hg::cuda::ConvShape;

namespace {

using Product = std::array<int64_t, 3>;  // offsets in x, w, y of one multiply-add

ConvShape make_shape(int64_t N, int64_t H, int64_t W, int64_t C, int64_t K, int64_t R, int64_t S, int64_t G,
                     std::array<int64_t, 2> st, std::array<int64_t, 2> pd, std::array<int64_t, 2> dl) {
  ConvShape s{};
  s.N = N, s.H = H, s.W = W, s.C = C, s.K = K, s.R = R, s.S = S, s.G = G, s.Cg = C / G, s.Kg = K / G;
  s.sh = st[0], s.sw = st[1], s.ph = pd[0], s.pw = pd[1], s.dh = dl[0], s.dw = dl[1];
  s.P = (H + 2 * pd[0] - dl[0] * (R - 1) - 1) / st[0] + 1;
  s.Q = (W + 2 * pd[1] - dl[1] * (S - 1) - 1) / st[1] + 1;
  return s;
}

std::vector<Product> by_definition(const ConvShape& s) {
  std::vector<Product> v;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t p = 0; p < s.P; ++p)
      for (int64_t q = 0; q < s.Q; ++q)
        for (int64_t k = 0; k < s.K; ++k)
          for (int64_t r = 0; r < s.R; ++r)
            for (int64_t t = 0; t < s.S; ++t)
              for (int64_t c = 0; c < s.Cg; ++c) {
                const int64_t h = p * s.sh - s.ph + r * s.dh, w = q * s.sw - s.pw + t * s.dw;
                if (h < 0 || h >= s.H || w < 0 || w >= s.W) continue;
                const int64_t g = k / s.Kg;
                v.push_back({((n * s.H + h) * s.W + w) * s.C + g * s.Cg + c, ((k * s.R + r) * s.S + t) * s.Cg + c,
                             ((n * s.P + p) * s.Q + q) * s.K + k});
              }
  std::sort(v.begin(), v.end());
  return v;
}

// The products the forward GEMM sums: rows m = output pixels, columns kk = (r, s, c).
std::vector<Product> by_im2col(const ConvShape& s) {
  std::vector<Product> v;
  const int64_t RSCg = s.R * s.S * s.Cg;
  for (int64_t g = 0; g < s.G; ++g)
    for (int64_t m = 0; m < s.N * s.P * s.Q; ++m)
      for (int64_t kk = 0; kk < RSCg; ++kk) {
        const int64_t x = hg::cuda::im2col_offset(s, g, m, kk);
        if (x < 0) continue;
        for (int64_t k = 0; k < s.Kg; ++k) v.push_back({x, (g * s.Kg + k) * RSCg + kk, m * s.K + g * s.Kg + k});
      }
  std::sort(v.begin(), v.end());
  return v;
}

// The products the input-gradient GEMM sums: rows m = input pixels, columns j = (r, s, k).
std::vector<Product> by_gather(const ConvShape& s) {
  std::vector<Product> v;
  for (int64_t g = 0; g < s.G; ++g)
    for (int64_t m = 0; m < s.N * s.H * s.W; ++m)
      for (int64_t j = 0; j < s.R * s.S * s.Kg; ++j) {
        const int64_t y = hg::cuda::dgrad_gather_offset(s, g, m, j);
        if (y < 0) continue;
        for (int64_t c = 0; c < s.Cg; ++c)
          v.push_back({m * s.C + g * s.Cg + c, hg::cuda::dgrad_weight_offset(s, g, j, c), y});
      }
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("conv im2col and gather maps name the convolution's products", "[cuda][indexing][conv2d]") {
  const ConvShape shapes[] = {
      make_shape(2, 5, 6, 4, 6, 3, 2, 2, {2, 1}, {1, 1}, {1, 2}),
      make_shape(1, 7, 7, 3, 2, 3, 3, 1, {2, 2}, {1, 1}, {1, 1}),
      make_shape(2, 4, 5, 2, 4, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}),
      make_shape(1, 9, 8, 6, 3, 2, 3, 3, {3, 2}, {0, 2}, {2, 1}),
  };
  for (const ConvShape& s : shapes) {
    INFO("H=" << s.H << " W=" << s.W << " C=" << s.C << " K=" << s.K << " R=" << s.R << " S=" << s.S
              << " G=" << s.G << " stride=" << s.sh << "," << s.sw);
    const std::vector<Product> want = by_definition(s);
    REQUIRE(!want.empty());
    REQUIRE(by_im2col(s) == want);
    REQUIRE(by_gather(s) == want);
  }
}

TEST_CASE("output_reading solves i = o*stride - pad + t*dilation", "[cuda][indexing][conv2d]") {
  using hg::cuda::output_reading;
  CHECK(output_reading(4, 1, 2, 1, 1, 4) == 2);   // 2*2 - 1 + 1 = 4
  CHECK(output_reading(3, 1, 2, 1, 1, 4) == -1);  // 3 + 1 - 1 is odd: no output lands there
  CHECK(output_reading(0, 2, 1, 1, 1, 5) == -1);  // would need o = -1
  CHECK(output_reading(9, 0, 2, 0, 1, 4) == -1);  // o = 4.5 -> none; and o = 4 is past the end
  CHECK(output_reading(8, 0, 2, 0, 1, 4) == -1);  // o = 4 is past the end
  CHECK(output_reading(6, 0, 2, 0, 1, 4) == 3);
}

TEST_CASE("a dgrad stride phase's taps are exactly those that reach its pixels", "[cuda][indexing][conv2d]") {
  for (int64_t stride = 1; stride <= 4; ++stride)
    for (int64_t dilation = 1; dilation <= 4; ++dilation)
      for (int64_t pad = 0; pad <= 3; ++pad)
        for (int64_t taps = 1; taps <= 7; ++taps)
          for (int64_t phase = 0; phase < stride; ++phase) {
            INFO("stride " << stride << " dilation " << dilation << " pad " << pad << " taps " << taps << " phase "
                           << phase);
            int64_t first = 0, step = 0, count = 0;
            hg::cuda::dgrad_phase_taps(phase, stride, pad, dilation, taps, first, step, count);
            std::vector<int64_t> progression, reaching;
            for (int64_t i = 0; i < count; ++i) progression.push_back(first + i * step);
            // Every input position of the phase (several periods of it) is reached by the
            // same taps: those whose output position is a whole number.
            for (int64_t t = 0; t < taps; ++t)
              if ((phase + pad - t * dilation) % stride == 0) reaching.push_back(t);
            REQUIRE(progression == reaching);
            for (int64_t i = phase; i < phase + 4 * stride; i += stride)
              for (int64_t t = 0; t < taps; ++t) {
                if (i + pad - t * dilation < 0) continue;  // left of the output: reached by none
                const bool in = std::find(reaching.begin(), reaching.end(), t) != reaching.end();
                REQUIRE((hg::cuda::output_reading(i, t, stride, pad, dilation, 1000) >= 0) == in);
              }
          }
  // The phases partition the input: 7 rows at stride 3 are 3 + 2 + 2.
  ConvShape s{};
  s.H = 7, s.W = 5, s.R = 3, s.S = 3, s.sh = 3, s.sw = 2, s.ph = 1, s.pw = 1, s.dh = 1, s.dw = 1;
  REQUIRE(hg::cuda::dgrad_phase(s, 0, 0).Hp == 3);
  REQUIRE(hg::cuda::dgrad_phase(s, 1, 0).Hp == 2);
  REQUIRE(hg::cuda::dgrad_phase(s, 2, 1).Hp == 2);
  REQUIRE(hg::cuda::dgrad_phase(s, 0, 0).Wp == 3);
  REQUIRE(hg::cuda::dgrad_phase(s, 0, 1).Wp == 2);
}
