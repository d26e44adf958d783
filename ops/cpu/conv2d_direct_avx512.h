// AVX-512 register tiles of the direct convolution (conv2d_direct.h) for filters in multiples
// of 16: a row of 16 filters is one zmm, and a tile keeps 24 zmm sums: 24 output pixels
// (forward, input gradient) by 16 filters or 12 by 32; 24 taps (weight gradient) by 16
// filters, 12 by 32, 8 by 48, 6 by 64. Each output is the same chain of fused multiply-adds
// in the same order as the AVX2 tiles and the GEMM engine: results equal them bit for bit.
// Internal, not installed.
#pragma once
#include <cstdint>

namespace hg::cpu::direct::avx512 {

// c[i * F + j] (F = 16 * vectors) = (first ? 0 : c[i * F + j]) + sum over taps t (in order) of
// px[i * stride + off[t]] * w[t * F + j]: the taps may come in consecutive runs, each call
// carrying on the chain of fused multiply-adds where the one before stopped.
using TileFn = void (*)(int64_t T, const float* px, int64_t stride, const int64_t* off, const float* w, float* c,
                        bool first);
// acc[i * F + f] (i < taps, f < F = 16 * vectors) = (first ? 0 : acc) + sum over rows x n
// pixels (in order) of x[i] * g[f]: x advancing by xs per pixel and by row_step from one
// row's first pixel to the next's, g by gs per pixel (gy's pixels are consecutive across
// rows). Whole rows in one call keep the sums in registers across a narrow layer's rows.
using WgradFn = void (*)(int64_t rows, int64_t n, const float* x, int64_t xs, int64_t row_step, const float* g,
                         int64_t gs, float* acc, bool first);

constexpr int64_t kMaxPixels = 24, kMaxTaps = 24;  // 24 zmm sums: pixels (taps) x vectors

// Whether this build has the tiles and this process's kernel path (hg::cpu::isa()) is avx512
// or wider.
bool usable();
// The forward tiles for 16 * vectors filters (vectors 1 or 2): multiples of pixel_step() (4)
// pixels up to max_pixels() (24 or 12), for a pixel stride.
int64_t pixel_step(int64_t vectors);
int64_t max_pixels(int64_t vectors);
TileFn tile(int64_t vectors, int64_t pixels, int64_t stride);
// The weight-gradient tile of 16 * vectors filters (vectors 1..4; gy's filter rows hold at
// least that many) by 1..kMaxTaps / vectors taps.
WgradFn wgrad(int64_t vectors, int64_t taps);

}  // namespace hg::cpu::direct::avx512
