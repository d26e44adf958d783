// AVX-512 register tiles of the direct convolution's 16-filter passes (conv2d_direct.h): a
// filter row of 16 is one zmm, so a tile holds up to 24 output pixels (forward, input
// gradient) or 24 taps (weight gradient) by 16 filters, twice an AVX2 tile's work per
// instruction. Each output is the same chain of fused multiply-adds in the same order as the
// AVX2 tiles: results equal them bit for bit. Internal, not installed.
#pragma once
#include <cstdint>

namespace hg::cpu::direct::avx512 {

// c[i * 16 + j] = sum over taps t (in order) of px[i * stride + off[t]] * w[t * 16 + j].
using TileFn = void (*)(int64_t T, const float* px, int64_t stride, const int64_t* off, const float* w, float* c);
// acc[i * 16 + f] (i < taps) = (first ? 0 : acc) + sum over n pixels (in order) of x[i] * g[f],
// x advancing by xs and g by gs per pixel.
using WgradFn = void (*)(int64_t n, const float* x, int64_t xs, const float* g, int64_t gs, float* acc, bool first);

constexpr int64_t kStep = 4, kMaxPixels = 24, kMaxTaps = 24;

// Whether this build has the tiles and this process's kernel path (hg::cpu::isa()) is avx512
// or wider.
bool usable();
// The forward tile of `pixels` (a multiple of kStep, at most kMaxPixels) for a pixel stride.
TileFn tile16(int64_t pixels, int64_t stride);
// The weight-gradient tile of 1..kMaxTaps taps.
WgradFn wgrad16(int64_t taps);

}  // namespace hg::cpu::direct::avx512
