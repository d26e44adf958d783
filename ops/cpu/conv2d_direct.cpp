// The direct convolution's register tile and its driver (conv2d_direct.h).
#include "ops/cpu/conv2d_direct.h"

#include <algorithm>
#include <cmath>

#include "ops/cpu/loops.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define HG_DIRECT_AVX2 1
#endif

namespace hg::cpu::direct {
namespace {

// c[NP x 8] = sum over taps t (in order) of px[i * stride + off[t]] * w[t * 8 + j]: output
// pixel i < NP, filter j. CS is the pixel stride when known at compile time (0: `stride`).
template <int NP, int CS>
void tile(int64_t T, const float* px, int64_t stride, const int64_t* off, const float* w, float* c) {
  const int64_t cs = CS ? CS : stride;
#ifdef HG_DIRECT_AVX2
  __m256 acc[NP];
#pragma GCC unroll 12
  for (int i = 0; i < NP; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t t = 0; t < T; ++t) {
    const __m256 wv = _mm256_loadu_ps(w + t * kFilters);
    const float* x = px + off[t];
#pragma GCC unroll 12
    for (int i = 0; i < NP; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + i * cs), wv, acc[i]);
  }
#pragma GCC unroll 12
  for (int i = 0; i < NP; ++i) _mm256_storeu_ps(c + i * kFilters, acc[i]);
#else
  float acc[NP][kFilters] = {};
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < NP; ++i)
      for (int64_t j = 0; j < kFilters; ++j) acc[i][j] = std::fma(px[i * cs + off[t]], w[t * kFilters + j], acc[i][j]);
  for (int64_t i = 0; i < NP; ++i)
    for (int64_t j = 0; j < kFilters; ++j) c[i * kFilters + j] = acc[i][j];
#endif
}

using TileFn = void (*)(int64_t, const float*, int64_t, const int64_t*, const float*, float*);

// The tiles of 12, 8 and 4 pixels for a pixel stride.
template <int NP>
TileFn tile_for(int64_t stride) {
  switch (stride) {
    case 1: return tile<NP, 1>;
    case 8: return tile<NP, 8>;
    case 16: return tile<NP, 16>;
    default: return tile<NP, 0>;
  }
}

}  // namespace

void pack_weights(Plan& plan, const float* wt, int64_t F, int64_t T) {
  plan.F = F;
  plan.weights.resize(static_cast<size_t>(F * T));
  for (int64_t fb = 0; fb < F / kFilters; ++fb)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < kFilters; ++j)
        plan.weights[static_cast<size_t>((fb * T + t) * kFilters + j)] = wt[(fb * kFilters + j) * T + t];
}

void run(const Plan& plan, const gemm::Output& out, const gemm::Epilogue<float>& ep) {
  const Padded& img = *plan.img;
  const int64_t T = static_cast<int64_t>(plan.offsets.size()), rows = img.N * plan.P, blocks = plan.F / kFilters;
  const TileFn fns[3] = {tile_for<4>(img.C), tile_for<8>(img.C), tile_for<kPixels>(img.C)};
  const int threads = rows * plan.Q * plan.F * T < (int64_t{1} << 18) ? 1 : op_threads();
  parallel_static(threads, rows, [&](int64_t row) {
    const int64_t n = row / plan.P, p = row % plan.P;
    const float* base = img.data.data() + (n * img.Hp + p * plan.sh) * img.Wp * img.C;
    alignas(32) float c[kPixels * kFilters];
    for (int64_t q0 = 0; q0 < plan.Q; q0 += kPixels) {
      // A row's last few pixels take the smallest tile that holds them, ending at the row's
      // end (when the row is shorter, overlapping the tile before: those pixels' sums are
      // computed again, the same chain, and stored again unchanged).
      const int64_t left = plan.Q - q0, size = left > 8 ? kPixels : left > 4 ? 8 : 4;
      const int64_t q = std::max<int64_t>(0, std::min(q0, plan.Q - size));
      const TileFn fn = fns[size / 4 - 1];
      for (int64_t b = 0; b < blocks; ++b) {
        fn(T, base + q * img.C, img.C, plan.offsets.data(), plan.weights.data() + b * T * kFilters, c);
        gemm::store_tile<float>(c, kFilters, row * plan.Q + q, std::min(size, plan.Q - q), b * kFilters, kFilters, out,
                                ep);
      }
    }
  });
}

}  // namespace hg::cpu::direct
