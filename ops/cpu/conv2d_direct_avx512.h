// AVX-512 register tiles of the direct convolution's 16-filter passes (conv2d_direct.h): a
// filter row of 16 is one zmm, so a tile holds up to 24 output pixels (forward, input
// gradient) or 24 taps (weight gradient) by 16 filters, twice an AVX2 tile's work per
// instruction. The weight gradient also has tiles of 12, 8 and 6 taps by 32, 48 and 64
// filters (24 zmm accumulators each). Each output is the same chain of fused multiply-adds in the same order as the
// AVX2 tiles: results equal them bit for bit. Internal, not installed.
#pragma once
#include <cstdint>

namespace hg::cpu::direct::avx512 {

// c[i * 16 + j] = sum over taps t (in order) of px[i * stride + off[t]] * w[t * 16 + j].
using TileFn = void (*)(int64_t T, const float* px, int64_t stride, const int64_t* off, const float* w, float* c);
// acc[i * F + f] (i < taps, f < F = 16 * vectors) = (first ? 0 : acc) + sum over rows x n
// pixels (in order) of x[i] * g[f]: x advancing by xs per pixel and by row_step from one
// row's first pixel to the next's, g by gs per pixel (gy's pixels are consecutive across
// rows). Whole rows in one call keep the sums in registers across a narrow layer's rows.
using WgradFn = void (*)(int64_t rows, int64_t n, const float* x, int64_t xs, int64_t row_step, const float* g,
                         int64_t gs, float* acc, bool first);

constexpr int64_t kStep = 4, kMaxPixels = 24, kMaxTaps = 24;

// Whether this build has the tiles and this process's kernel path (hg::cpu::isa()) is avx512
// or wider.
bool usable();
// The forward tile of `pixels` (a multiple of kStep, at most kMaxPixels) for a pixel stride.
TileFn tile16(int64_t pixels, int64_t stride);
// The weight-gradient tile of 16 * vectors filters (vectors 1..4; gy's filter rows hold at
// least that many) by 1..kMaxTaps / vectors taps.
WgradFn wgrad(int64_t vectors, int64_t taps);

}  // namespace hg::cpu::direct::avx512
