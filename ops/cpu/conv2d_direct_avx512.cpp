// The AVX-512 tiles of the direct convolution (conv2d_direct_avx512.h).
#include "ops/cpu/conv2d_direct_avx512.h"

#include <array>
#include <utility>

#include "framework/cpu/isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HG_DIRECT_AVX512 1
#endif

#ifdef HG_DIRECT_AVX512
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
#include "ops/cpu/gemm/outer_avx512.h"

namespace hg::cpu::direct::avx512 {
namespace {

template <int NP, int CS>
void tile(int64_t T, const float* px, int64_t stride, const int64_t* off, const float* w, float* c) {
  const int64_t cs = CS ? CS : stride;
  __m512 acc[NP];
#pragma GCC unroll 24
  for (int i = 0; i < NP; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t t = 0; t < T; ++t) {
    const __m512 wv = _mm512_loadu_ps(w + t * 16);
    const float* x = px + off[t];
#pragma GCC unroll 24
    for (int i = 0; i < NP; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(x[i * cs]), wv, acc[i]);
  }
#pragma GCC unroll 24
  for (int i = 0; i < NP; ++i) _mm512_storeu_ps(c + i * 16, acc[i]);
}

// NT taps by NV vectors of 16 filters (gemm/outer_avx512.h): taps broadcast, filters from gy.
template <int NT, int NV>
void wgrad_tile(int64_t rows, int64_t n, const float* x, int64_t xs, int64_t row_step, const float* g, int64_t gs,
                float* acc, bool first) {
  gemm::outer_avx512<NT, NV>(rows, n, x, xs, row_step, g, gs, acc, 16 * NV, first);
}

template <int CS, int... S>
constexpr std::array<TileFn, sizeof...(S)> tiles(std::integer_sequence<int, S...>) {
  return {tile<(S + 1) * kStep, CS>...};
}

template <int NV, int... NT>
constexpr std::array<WgradFn, sizeof...(NT)> wgrad_tiles(std::integer_sequence<int, NT...>) {
  return {wgrad_tile<NT + 1, NV>...};
}

constexpr auto kSteps = std::make_integer_sequence<int, kMaxPixels / kStep>{};
constexpr std::array<TileFn, kMaxPixels / kStep> kTiles1 = tiles<1>(kSteps), kTiles8 = tiles<8>(kSteps),
                                                  kTiles16 = tiles<16>(kSteps), kTilesAny = tiles<0>(kSteps);
constexpr std::array<WgradFn, 24> kWgrad1 = wgrad_tiles<1>(std::make_integer_sequence<int, 24>{});
constexpr std::array<WgradFn, 12> kWgrad2 = wgrad_tiles<2>(std::make_integer_sequence<int, 12>{});
constexpr std::array<WgradFn, 8> kWgrad3 = wgrad_tiles<3>(std::make_integer_sequence<int, 8>{});
constexpr std::array<WgradFn, 6> kWgrad4 = wgrad_tiles<4>(std::make_integer_sequence<int, 6>{});

}  // namespace

TileFn tile16(int64_t pixels, int64_t stride) {
  const size_t i = static_cast<size_t>(pixels / kStep - 1);
  switch (stride) {
    case 1: return kTiles1[i];
    case 8: return kTiles8[i];
    case 16: return kTiles16[i];
    default: return kTilesAny[i];
  }
}

WgradFn wgrad(int64_t vectors, int64_t taps) {
  const size_t i = static_cast<size_t>(taps - 1);
  switch (vectors) {
    case 1: return kWgrad1[i];
    case 2: return kWgrad2[i];
    case 3: return kWgrad3[i];
    default: return kWgrad4[i];
  }
}

bool usable() { return static_cast<int>(isa()) >= static_cast<int>(Isa::avx512); }

}  // namespace hg::cpu::direct::avx512

#pragma GCC pop_options
#else
namespace hg::cpu::direct::avx512 {
TileFn tile16(int64_t, int64_t) { return nullptr; }
WgradFn wgrad(int64_t, int64_t) { return nullptr; }
bool usable() { return false; }
}  // namespace hg::cpu::direct::avx512
#endif
