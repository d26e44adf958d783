// Direct convolution for the few-filter layers (8 or 16 output channels, as the U-Net's
// full-resolution level has): the GEMM engine would copy every pixel's receptive field
// into a panel and use each copied value for only 8-16 filters, so packing, not
// arithmetic, sets its speed there. Here a register tile of 12 neighbouring output pixels
// by 8 filters (or 6 by 16) reads its inputs straight from a zero-padded copy of the image
// (the pixels' taps lie C values apart; made a block of rows at a time, in cache, see
// Padded), and each output's sum is the same chain of fused
// multiply-adds over the taps in the same order as the engine's: results equal it bit for
// bit. Used by the forward and, as the convolution of the output gradient with the
// flipped filters, by the stride-1 input gradient.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/cpu/gemm/engine.h"

namespace hg::cpu::direct {

// Output pixels per AVX2 register tile (consecutive columns of one output row) and filters;
// with 16 filters on AVX-512 a tile is up to 24 pixels (conv2d_direct_avx512.h).
constexpr int64_t kPixels = 12, kFilters = 8;

// One "image" the direct kernel reads: f32, zero-padded so every tap of every output pixel
// is inside it: [N, Hp, Wp, C] at `data` (the storage below, or the tensor itself when it is
// f32 and needs no padding), or with `planar` [N, Hp, C, Wp] (each channel's row contiguous:
// what a run of one or two filters reads, see planar_layout).
// Or, with `data` null, made a block of rows at a time as run() needs them: rows(n, hp,
// count, dst) writes padded rows [hp, hp + count) of image n to dst ([count][Wp][C]). A
// block of output rows then reads its input from a buffer that stays in cache, and no padded
// copy of the whole image is written to memory and read back.
struct Padded {
  std::vector<float> storage;
  const float* data = nullptr;
  int64_t N = 0, Hp = 0, Wp = 0, C = 0;
  bool planar = false;
  std::function<void(int64_t n, int64_t hp, int64_t count, float* dst)> rows;
};

// Whether run() computes `filters` filters over rows of Q output pixels with pixels in lanes
// (1 or 2 filters, Q >= 8): then the image must be padded planar (one channel is both).
bool planar_layout(int64_t filters, int64_t Q);

// dst[c * dst_stride + w] = src[w * C + c] for w < n, c < C: n pixels of C channels into C
// rows of n, widened exactly to f32 (T: float, half or bfloat16).
template <class T>
void transpose_pixels(const T* src, int64_t n, int64_t C, float* dst, int64_t dst_stride);

// The convolution a direct run computes: out[n, p, q, f] = epilogue(sum over taps t of
// img[n, p*sh + row(t), q + col(t), ch(t)] * wt[f][t]), t in the order of `offsets`
// (offsets[t] = (row(t) * Wp + col(t)) * C + ch(t) in the padded image), wt given as
// F x T (filter-major). Output pixel (n, p, q) goes where `out` says (as the engine's).
struct Plan {
  const Padded* img = nullptr;
  int64_t P = 0, Q = 0, sh = 1;
  std::vector<int64_t> offsets;  // T taps
  std::vector<float> weights;    // [F / width][T][width]: each tap's filters side by side
  int64_t F = 0, width = 8;      // filters; per tile: 8, 16 for multiples of 16 (AVX-512: up to 64)
};

// Packs F x T filter-major weights (f32) into the plan's [F / width][T][width] layout (a
// last block of fewer than `width` filters padded with zeros, never stored).
void pack_weights(Plan& plan, const float* wt, int64_t F, int64_t T);

// Runs the plan: every output pixel and filter, rows split among the threads (a row's sums
// never depend on another's), through the engine's epilogue store.
void run(const Plan& plan, const gemm::Output& out, const gemm::Epilogue<float>& ep);

// The weight gradient of 8 or 16 filters, direct: gw[f, t] = sum over pixels m (in order) of
// gy[m, f] * img[pixel m's tap t], the same chain per weight as the outer-product driver's.
// A register tile holds 12 (6) taps of one kernel row (contiguous in the padded image, so one
// pointer serves them) by the 8 (16) filters (one or two vectors of gy per pixel): nothing is
// packed. Needs unit column dilation; any strides.
struct WgradPlan {
  const Padded* img = nullptr;
  int64_t P = 0, Q = 0, sh = 1, sw = 1, dh = 1, R = 1, S = 1;
  const float* gy = nullptr;  // [pixels, gy_stride], the F filters at the start of a row
  int64_t gy_stride = 8;
  int64_t F = 8;        // gy's filters: 8, 16, or on AVX-512 a multiple of 16
  int64_t filters = 8;  // of which real (the rest are gy's zero padding): gw has this many rows
};

// gw [filters, R*S*C] (row-major, overwritten) = the sum over pixels [m0, m0 + len).
void wgrad_chunk(const WgradPlan& plan, int64_t m0, int64_t len, float* gw);

// Whether wgrad_chunk has tiles for this many filters (F = filters, or 8 for fewer): up to 8
// or 16 everywhere; any multiple of 16 on the AVX-512 path.
bool wgrad_tiles_for(int64_t filters);

// Whether the AVX-512 tiles (filters in multiples of 16, up to 64 per tile) run here.
bool avx512_usable();

}  // namespace hg::cpu::direct
