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

// NP pixels by NV vectors of 16 filters: c[i * 16 NV + j] (see TileFn).
template <int NP, int NV, int CS>
void tile(int64_t T, const float* px, int64_t stride, const int64_t* off, const float* w, float* c, bool first) {
  constexpr int F = 16 * NV;
  const int64_t cs = CS ? CS : stride;
  __m512 acc[NP][NV];
#pragma GCC unroll 24
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + i * F + 16 * v);
  for (int64_t t = 0; t < T; ++t) {
    __m512 wv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) wv[v] = _mm512_loadu_ps(w + t * F + 16 * v);
    const float* x = px + off[t];
#pragma GCC unroll 24
    for (int i = 0; i < NP; ++i) {
      const __m512 xi = _mm512_set1_ps(x[i * cs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(xi, wv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 24
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + i * F + 16 * v, acc[i][v]);
}

// NT taps by NV vectors of 16 filters (gemm/outer_avx512.h): taps broadcast, filters from gy.
template <int NT, int NV>
void wgrad_tile(int64_t rows, int64_t n, const float* x, int64_t xs, int64_t row_step, const float* g, int64_t gs,
                float* acc, bool first) {
  gemm::outer_avx512<NT, NV>(rows, n, x, xs, row_step, g, gs, acc, 16 * NV, first);
}

constexpr int step_of(int) { return 4; }
constexpr int sizes_of(int NV) { return 24 / NV / step_of(NV); }

// The tiles of step, 2 step, ... pixels by NV vectors, for pixel stride CS.
template <int NV, int CS, int... S>
constexpr std::array<TileFn, sizeof...(S)> tiles(std::integer_sequence<int, S...>) {
  return {tile<(S + 1) * step_of(NV), NV, CS>...};
}

template <int NV>
struct Tiles {
  static constexpr auto seq = std::make_integer_sequence<int, sizes_of(NV)>{};
  static constexpr std::array<TileFn, sizes_of(NV)> c1 = tiles<NV, 1>(seq), c8 = tiles<NV, 8>(seq),
                                                     c16 = tiles<NV, 16>(seq), c32 = tiles<NV, 32>(seq),
                                                     any = tiles<NV, 0>(seq);
  static TileFn get(int64_t pixels, int64_t stride) {
    const size_t i = static_cast<size_t>(pixels / step_of(NV) - 1);
    switch (stride) {
      case 1: return c1[i];
      case 8: return c8[i];
      case 16: return c16[i];
      case 32: return c32[i];
      default: return any[i];
    }
  }
};

template <int NV, int... NT>
constexpr std::array<WgradFn, sizeof...(NT)> wgrad_tiles(std::integer_sequence<int, NT...>) {
  return {wgrad_tile<NT + 1, NV>...};
}

constexpr std::array<WgradFn, 24> kWgrad1 = wgrad_tiles<1>(std::make_integer_sequence<int, 24>{});
constexpr std::array<WgradFn, 12> kWgrad2 = wgrad_tiles<2>(std::make_integer_sequence<int, 12>{});
constexpr std::array<WgradFn, 8> kWgrad3 = wgrad_tiles<3>(std::make_integer_sequence<int, 8>{});
constexpr std::array<WgradFn, 6> kWgrad4 = wgrad_tiles<4>(std::make_integer_sequence<int, 6>{});

}  // namespace

int64_t pixel_step(int64_t vectors) { return step_of(static_cast<int>(vectors)); }
int64_t max_pixels(int64_t vectors) { return 24 / vectors; }

TileFn tile(int64_t vectors, int64_t pixels, int64_t stride) {
  return vectors == 1 ? Tiles<1>::get(pixels, stride) : Tiles<2>::get(pixels, stride);
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
int64_t pixel_step(int64_t) { return 4; }
int64_t max_pixels(int64_t) { return 4; }
TileFn tile(int64_t, int64_t, int64_t) { return nullptr; }
WgradFn wgrad(int64_t, int64_t) { return nullptr; }
bool usable() { return false; }
}  // namespace hg::cpu::direct::avx512
#endif
