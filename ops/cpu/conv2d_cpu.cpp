// CPU convolution as implicit GEMM on the engine (ops/cpu/gemm): the receptive fields are
// packed straight from the NHWC tensors (no im2col buffer), f16/bf16 widened exactly at
// pack time, f32 accumulation, one rounding per output (the forward's bias in the sum).
// The input gradient runs per stride phase, so no zero is multiplied; the weight gradient
// sums fixed chunks of pixels in a fixed order (the outer-product driver, gemm/outer.h), so
// it does not depend on the thread count. Passes with 8 (or, 3x3, 16) output channels run
// the direct convolution (conv2d_direct.h) instead: the same sums in the same order; a 1x1
// pass with few filters (a segmentation head) the pointwise kernels (conv2d_pointwise.h),
// also the same sums; windows that tile the image (2x2 stride 2) take their input gradient
// as one plain product per kernel row. On a CPU with AMX, most f16/bf16 passes run the direct
// AMX convolution (conv2d_amx.h): the tile unit reads the padded image itself and sums in its
// own order, within the f32 bound.
#include <algorithm>
#include <vector>

#include "ops/conv2d_kernels.h"
#include "ops/cpu/conv2d_amx.h"
#include "ops/cpu/conv2d_direct.h"
#include "ops/cpu/conv2d_pointwise.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/gemm/outer.h"
#include "ops/cpu/gemm/sources.h"

namespace hg::cpu {
namespace {

using gemm::ConvGeometry;

// Sizes of one convolution, x [N, H, W, C] -> y [N, P, Q, K], w [K, R, S, Cg].
struct Geometry {
  int64_t N, H, W, C, K, R, S, P, Q, G, Cg, Kg, RSCg;
  int64_t sh, sw, ph, pw, dh, dw;
};

Geometry geometry(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p) {
  Geometry g{};
  g.N = x.size(0), g.H = x.size(1), g.W = x.size(2), g.C = x.size(3);
  g.K = w.size(0), g.R = w.size(1), g.S = w.size(2), g.Cg = w.size(3);
  g.P = y.size(1), g.Q = y.size(2), g.G = p.groups, g.Kg = g.K / g.G, g.RSCg = g.R * g.S * g.Cg;
  g.sh = p.stride[0], g.sw = p.stride[1], g.ph = p.padding[0], g.pw = p.padding[1];
  g.dh = p.dilation[0], g.dw = p.dilation[1];
  return g;
}

// An activation as the gather sources read it: f32/f64 in place; f16/bf16 widened to f32
// once into a reused buffer (exact), since the gathers read every value R*S times. A 1x1
// kernel's gathers read each value once: they widen it as they pack (with_activation).
template <class T>
using Wide = compute_t<T>;

template <class T>
const Wide<T>* activation(const Tensor& t, int slot) {
  if constexpr (std::is_same_v<T, Wide<T>>) {
    return t.data<T>();
  } else {
    thread_local std::vector<float> bufs[2];
    std::vector<float>& buf = bufs[slot];
    const int64_t n = t.numel();
    if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
    const T* src = t.data<T>();
    float* dst = buf.data();
    const int64_t block = int64_t{1} << 16, blocks = (n + block - 1) / block;
    parallel_static(blocks < 4 ? 1 : op_threads(), blocks,
                    [&](int64_t b) { gemm::widen(src + b * block, dst + b * block, std::min(block, n - b * block)); });
    return dst;
  }
}

// Calls f(p) with the activation as the gathers should read it: t's own values when the
// gathers read each once (reads == 1: a 1x1 kernel, or windows that do not overlap; or it is
// f32/f64 already), else activation()'s widened copy.
template <class T, class F>
void with_activation(const Tensor& t, int slot, int64_t reads, F&& f) {
  if (reads == 1)
    f(t.data<T>());
  else
    f(activation<T>(t, slot));
}

// How many of the forward's receptive fields read one value of x (at most): 1 where the
// windows do not overlap (a 1x1 kernel; the decoder's 2x2 stride-2 transposed convolution).
int64_t field_reads(const Geometry& g) {
  const bool overlap = (g.R - 1) * g.dh >= g.sh || (g.S - 1) * g.dw >= g.sw;
  return overlap ? g.R * g.S : 1;
}

// The forward's receptive fields of x for group grp, rows = output pixels.
template <class T>
ConvGeometry<T> forward_fields(const Geometry& g, const T* x, int64_t grp) {
  return {x, g.H, g.W, g.C, grp * g.Cg, g.Cg, g.R, g.S, g.P, g.Q, g.sh, -g.ph, g.dh, g.sw, -g.pw, g.dw};
}

// A bias widened exactly to the accumulator type (empty when undefined): the epilogue adds
// it to the sum before the one rounding.
template <class T>
std::vector<compute_t<T>> widened_bias(const Tensor& bias) {
  std::vector<compute_t<T>> b(bias.defined() ? static_cast<size_t>(bias.numel()) : 0);
  if (bias.defined()) gemm::widen(bias.data<T>(), b.data(), bias.numel());
  return b;
}

// Whether the direct convolution (conv2d_direct.h) beats the engine for a pass with this
// many filters (output channels of the pass), whatever the kernel size. Measured on Zen 3
// (bench/conv_wgrad, the U-Net's shapes): with 8 filters direct is 1.5-2.7x faster (3x3 8->8
// @64: 22 -> 46 GFLOP/s forward and input gradient, one thread); with 16, 1.1-1.25x for 3x3
// kernels, and since its inline store also for 1x1 (one thread: 1x1 32->16 @32 forward 35 ->
// 67 GFLOP/s, the input gradient of 1x1 16->8 @64, 16 output channels from 8 taps, 14 -> 39;
// the engine spends a K of 8-32 on packing and stores); from 32 filters on the engine's 6x16
// tile wins there. On an AVX-512 Xeon (model 207, 2 threads, conv_wgrad --width 16) the zmm
// tile of 12 pixels x 32 filters wins too: 3x3 32->32 @32 forward 166-203 -> 296-300 GFLOP/s,
// input gradient 168-202 -> 293-297, 1x1 64->32 @32 forward 160 -> 266; with 64 filters (6
// pixels x 64) it tied the engine at 16 pixels a row and lost 10-55% at 8 and 4, so those
// stay on the engine.
bool direct_wins(int64_t filters) {
  return filters <= 8 || filters == 16 || (filters == 32 && direct::avx512_usable());
}

// Padded row hp of image n of x [N, H, W, C] (zero rows / columns `top` / `left` before the
// image's, and as many after as make it Wp wide) into dst, widened exactly to f32.
template <class T>
void pad_row(float* dst, const T* x, int64_t n, int64_t hp, int64_t H, int64_t W, int64_t C, int64_t top,
             int64_t left, int64_t Wp) {
  const int64_t row = Wp * C, h = hp - top;
  if (h < 0 || h >= H) {
    std::fill_n(dst, row, 0.0f);
    return;
  }
  const int64_t w_in = std::min(W, Wp - left);
  std::fill_n(dst, left * C, 0.0f);
  gemm::widen(x + (n * H + h) * W * C, dst + left * C, w_in * C);
  std::fill(dst + (left + w_in) * C, dst + row, 0.0f);
}

// img = x [N, H, W, C] widened to f32 (exactly) with `top` / `left` zero rows / columns before
// and as many after as make it Hp x Wp: one pass over x, whatever its dtype.
// With `planar` (direct::planar_layout), the rows are written [C][Wp] instead: widened, then
// transposed, in the same pass.
template <class T>
void pad_into(direct::Padded& img, const T* x, int64_t N, int64_t H, int64_t W, int64_t C, int64_t top,
              int64_t left, int64_t Hp, int64_t Wp, bool planar = false) {
  img.N = N, img.Hp = Hp, img.Wp = Wp, img.C = C, img.planar = planar && C > 1;
  img.rows = nullptr;
  if constexpr (std::is_same_v<T, float>)
    if (top == 0 && left == 0 && Hp == H && Wp == W && !img.planar) {  // nothing to pad or widen: read x itself
      img.data = x;
      return;
    }
  img.storage.resize(static_cast<size_t>(N * Hp * Wp * C));
  img.data = img.storage.data();
  const int64_t rows = N * Hp, row = Wp * C;
  parallel_static(rows * row < (1 << 16) ? 1 : op_threads(), rows, [&](int64_t r) {
    float* dst = img.storage.data() + r * row;
    const int64_t n = r / Hp, h = r % Hp - top;
    if (!img.planar) return pad_row(dst, x, n, r % Hp, H, W, C, top, left, Wp);
    if (h < 0 || h >= H) {
      std::fill_n(dst, row, 0.0f);
      return;
    }
    const int64_t w_in = std::min(W, Wp - left);
    for (int64_t c = 0; c < C; ++c) {
      std::fill_n(dst + c * Wp, left, 0.0f);
      std::fill(dst + c * Wp + left + w_in, dst + (c + 1) * Wp, 0.0f);
    }
    direct::transpose_pixels(x + (n * H + h) * W * C, w_in, C, dst + left, Wp);
  });
}

// The direct run's image (pixel-major, not planar) as pad_into would make it, but made a
// block of rows at a time where direct::run needs them (direct::Padded::rows); f32 that
// needs no padding is read in place. x must outlive the run.
template <class T>
void pad_by_rows(direct::Padded& img, const T* x, int64_t N, int64_t H, int64_t W, int64_t C, int64_t top,
                 int64_t left, int64_t Hp, int64_t Wp) {
  if constexpr (std::is_same_v<T, float>)
    if (top == 0 && left == 0 && Hp == H && Wp == W) return pad_into(img, x, N, H, W, C, top, left, Hp, Wp);
  img.N = N, img.Hp = Hp, img.Wp = Wp, img.C = C, img.planar = false;
  img.data = nullptr;
  img.rows = [=](int64_t n, int64_t hp, int64_t count, float* dst) {
    for (int64_t i = 0; i < count; ++i) pad_row(dst + i * Wp * C, x, n, hp + i, H, W, C, top, left, Wp);
  };
}

// A 1x1 convolution with few filters (conv2d_pointwise.h: a segmentation head), where its
// kernels take K, C and the dtype (measured there).
bool pointwise_fits(const Geometry& g) {
  return g.G == 1 && g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// The direct forward: stride 1 along a row of pixels, one group, few filters, rows of at
// least the smallest register tile.
bool direct_forward_fits(const Geometry& g) {
  return g.G == 1 && g.sw == 1 && direct_wins(g.K) && g.Q >= 4;
}

template <class T>
void direct_forward(const Geometry& g, const T* x, const T* w, const float* bias, const Tensor& yt) {
  thread_local direct::Padded img;
  const int64_t Hp = std::max(g.H + g.ph, (g.P - 1) * g.sh + (g.R - 1) * g.dh + 1);
  const int64_t Wp = std::max(g.W + g.pw, (g.Q - 1) + (g.S - 1) * g.dw + 1);
  if (direct::planar_layout(g.K, g.Q))
    pad_into(img, x, g.N, g.H, g.W, g.C, g.ph, g.pw, Hp, Wp, true);
  else
    pad_by_rows(img, x, g.N, g.H, g.W, g.C, g.ph, g.pw, Hp, Wp);
  direct::Plan plan;
  plan.img = &img, plan.P = g.P, plan.Q = g.Q, plan.sh = g.sh;
  for (int64_t r = 0; r < g.R; ++r)  // the engine's tap order: (r, s, c)
    for (int64_t s = 0; s < g.S; ++s)
      for (int64_t c = 0; c < g.C; ++c) plan.offsets.push_back((r * g.dh * Wp + s * g.dw) * g.C + c);
  std::vector<float> wt(static_cast<size_t>(g.K * g.RSCg));
  gemm::widen(w, wt.data(), g.K * g.RSCg);
  direct::pack_weights(plan, wt.data(), g.K, g.RSCg);
  gemm::Epilogue<float> ep;
  ep.bias = bias;
  direct::run(plan, gemm::Output{yt.data<T>(), yt.dtype(), g.P, g.Q, g.P * g.Q * g.K, g.Q * g.K, g.K, 1}, ep);
}

// The direct AMX convolution (conv2d_amx.h) for f16/bf16 tensors: one group, unit strides
// and column dilation, on a CPU whose tile unit passed its self-check. Chosen per pass where
// measured to win over the engine and the f32 direct tiles (Xeon with AMX, 2026-12-06,
// bench/conv_wgrad --width 16, 2 threads, after the tile buffers were aligned):
// - rows of at least 16 pixels, or 8 with at most 64 filters (the bf16 forward: any 8): the
//   flat padded grid computes Wp = Q + S - 1 columns per row in 64-pixel blocks, so short
//   rows are mostly waste (bf16 3x3 128->256 @4 forward 0.16 -> 0.25 ms; @8 the bf16 input
//   gradient 32->64 0.17 -> 0.05 won, 256->128 0.30 -> 0.50 lost; f16 forward 128->64 @8
//   0.53 -> 0.36 won, 64->128 @8 0.20 -> 0.22 lost);
// - at least 16 values per kernel row in bf16 (the first layer's 3 lost: forward 0.09 ->
//   0.12 ms); f16, four plane products per product, 24 for a 3x3 kernel (8->8 @64 forward
//   0.50 -> 0.44 ms) and 32 channels for 1x1 (16->8 @64 lost 0.27 -> 0.31);
// - at least 8 filters, 4 for the bf16 forward (the first layer's input gradient, one
//   filter, lost 0.15 -> 0.26 ms);
// - weight gradient (its reduction is over pixels, so short rows cost little): bf16 from 4
//   input channels (3x3 32->32 @32 0.66 -> 0.16 ms, 256->128 @8 0.69 -> 0.27, 1x1 16->4
//   @64 0.29 -> 0.17; the first layer's one channel lost 0.16 -> 0.23); f16 3x3 kernels from
//   16 input channels (64->32 @32 1.23 -> 0.72; 1x1 lost, 256->128 @8 0.15 -> 0.21).
template <class T>
constexpr bool on_tiles_type() {
  return std::is_same_v<T, bfloat16> || std::is_same_v<T, half>;
}
enum class AmxPass { forward, dgrad };
template <class T>
bool amx_wins(const Geometry& g, AmxPass pass) {
  const bool fwd = pass == AmxPass::forward;
  const int64_t channels = fwd ? g.C : g.K, filters = fwd ? g.K : g.C, rows = fwd ? g.Q : g.W;
  const bool long_rows = rows >= 16 || (rows >= 8 && filters <= 64);
  if constexpr (std::is_same_v<T, half>)
    return long_rows && filters >= 8 && (g.R * g.S > 1 ? g.S * channels >= 24 : channels >= 32);
  return (fwd ? rows >= 8 : long_rows) && g.S * channels >= 16 && filters >= (fwd ? 4 : 8);
}
template <class T>
bool amx_wgrad_wins(const Geometry& g) {
  if constexpr (std::is_same_v<T, half>) return g.R * g.S > 1 && g.C >= 16;
  return g.C >= 4;
}
// bf16 on vdpbf16ps (unit dpbf16: AMD Zen 5, 2026-12-06, bench/conv_wgrad --compare-tiles
// --width 8 / 16, 2 threads, against the f32 direct tiles and the engine, whose bf16 products
// run the vdpbf16ps pair kernel):
// - forward and input gradient of kernels wider than 1 where at least 7/8 of the flat grid's
//   columns are output columns (Q >= 7 (S - 1): 3x3 from rows of 14; w16 3x3 128->128 @8
//   input gradient lost 0.37 -> 0.45 ms), with at least 8 filters (the image's one-channel
//   input gradient lost 0.11 -> 0.39), and with 64 filters or 48 values per kernel row (a
//   partial step multiplies only its pairs): w16 64->64
//   @16 forward 0.38 -> 0.24 ms, 32->32 @32 0.32 -> 0.22, 16->16 @64 0.40 -> 0.39, w8 the
//   input gradient of 8->16 @32 0.21 -> 0.20; 24 lost (w8 8->8 @64 forward 0.44 -> 0.49);
// - 1x1 forward and input gradient from 8 filters and 8 channels: since the blocks run over
//   output pixels (fourteenth session, same host) they beat the f32 tiles and the engine's
//   pair kernel everywhere measured: w32 @128 64->32 @128 forward 2.6-2.9 -> 1.2 ms, input
//   gradient 2.3-2.4 -> 1.4-1.5, 128->64 @64 1.49 -> 0.79 and 1.26 -> 0.91-0.99; w16 32->16
//   @64 0.16 -> 0.09 and 0.15 -> 0.10; w8 16->8 @64 0.19 -> 0.13 and 0.15 -> 0.10 (the head,
//   4 filters forward and 4 channels backward, stays off);
// - weight gradient from 16 input channels and 16 filters, 32 filters for 1x1 (w16 64->64
//   @16 0.35 -> 0.25 ms, 16->16 @64 0.41 -> 0.35; 8 channels lost, w8 8->8 @64 0.61 -> 0.89;
//   so did 8 filters, 16->8 @64 1.08 -> 1.37, and 1x1 32->16 @64, 0.14 -> 0.19), where most
//   of the padded grid's slots are pixels (w8 4 x 4: 64->128 0.096 -> 0.112 ms; in the w16
//   step, 8 x 8 128->128 lost 0.40-0.43 (f32) -> 0.56-0.58 ms). Any number of filters since
//   the images are staged a group at a time (conv2d_amx_wgrad.h; ninth session, same host):
//   against the engine's pair kernel, w32 @128 3x3 64->64 @64 6.0-7.1 -> 3.7-3.8 ms, 256->128
//   @32 9.8-10.7 -> 7.4-7.5, 128->64 @64 12.4-12.9 -> 7.7; w16 64->64 @16 0.35 -> 0.25,
//   128->64 @16 0.64 -> 0.49, 1x1 128->64 @16 0.10 -> 0.08; none lost (the earlier cap at 64
//   filters, 64->64 @16 0.42 -> 0.45 ms on the tiles, no longer holds).
bool dot_wins(const Geometry& g, AmxPass pass) {
  const bool fwd = pass == AmxPass::forward;
  const int64_t channels = fwd ? g.C : g.K, filters = fwd ? g.K : g.C, rows = fwd ? g.Q : g.W;
  if (g.R == 1 && g.S == 1) return filters >= 8 && channels >= 8;  // no padded grid, no idle columns
  return g.S > 1 && rows >= 7 * (g.S - 1) && filters >= 8 && (filters >= 64 || g.S * channels >= 48);
}
bool dot_wgrad_wins(const Geometry& g) {
  // The reduction runs over each image's pixels in steps of 32 slots (over the padded grid
  // where Q is odd, conv2d_amx_wgrad.h): at least 4/5 of them real pixels.
  const int64_t Wp = g.Q + g.S - 1, slots = ((g.Q % 2 == 0 ? g.P * g.Q : (g.P - 1) * Wp + g.Q) + 31) / 32 * 32;
  return g.C >= 16 && g.K >= (g.R * g.S > 1 ? 16 : 32) && 5 * g.P * g.Q >= 4 * slots;
}

// The direct convolution on unit u fits: one group, unit strides and column dilation, and
// measured to win for this pass and shape on this unit.
bool tile_geometry(const Geometry& g) { return g.G == 1 && g.sh == 1 && g.sw == 1 && g.dw == 1; }
template <class T>
bool tiles_forward_fit(const Geometry& g, amx_conv::Unit u) {
  if (!tile_geometry(g) || !amx_conv::multiplies<T>(u)) return false;
  return u == amx_conv::Unit::amx ? amx_wins<T>(g, AmxPass::forward) : dot_wins(g, AmxPass::forward);
}
template <class T>
bool tiles_dgrad_fit(const Geometry& g, amx_conv::Unit u) {
  if (!tile_geometry(g) || (g.R - 1) * g.dh < g.ph || g.S - 1 < g.pw || !amx_conv::multiplies<T>(u)) return false;
  return u == amx_conv::Unit::amx ? amx_wins<T>(g, AmxPass::dgrad) : dot_wins(g, AmxPass::dgrad);
}
template <class T>
bool tiles_wgrad_fit(const Geometry& g, amx_conv::Unit u) {
  if (!tile_geometry(g) || !amx_conv::multiplies<T>(u)) return false;
  return u == amx_conv::Unit::amx ? amx_wgrad_wins<T>(g) : dot_wgrad_wins(g);
}

amx_conv::Sizes amx_shape(const Geometry& g) {
  return {g.N, g.H, g.W, g.C, g.K, g.R, g.S, g.P, g.Q, g.ph, g.pw, g.dh};
}

template <class T>
void forward_typed(const Tensor& xt, const Tensor& wt, const Tensor& bias, const Tensor& yt, const Conv2dOptions& prm) {
  using Acc = compute_t<T>;
  const Geometry g = geometry(xt, wt, yt, prm);
  const std::vector<Acc> b32 = widened_bias<T>(bias);
  if constexpr (on_tiles_type<T>())
    if (const amx_conv::Unit u = amx_conv::unit();
        tiles_forward_fit<T>(g, u) && amx_conv::forward<T>(u, amx_shape(g), xt.data<T>(), wt.data<T>(),
                                                           b32.empty() ? nullptr : b32.data(), yt.data<T>(), op_threads()))
      return;
  if constexpr (on_tiles_type<T>())  // f16/bf16: f32 stays on the direct tiles, which read it in place
    if (pointwise_fits(g) && pointwise::forward_fits(g.K, g.C)) {
      std::vector<float> w32(static_cast<size_t>(g.K * g.C));
      gemm::widen(wt.data<T>(), w32.data(), g.K * g.C);
      return pointwise::forward<T>(xt.data<T>(), g.N * g.P * g.Q, g.C, w32.data(), g.K,
                                   b32.empty() ? nullptr : b32.data(), yt.data<T>(), op_threads());
    }
  if constexpr (std::is_same_v<Acc, float>)
    if (direct_forward_fits(g))
      return direct_forward<T>(g, xt.data<T>(), wt.data<T>(), b32.empty() ? nullptr : b32.data(), yt);
  with_activation<T>(xt, 0, field_reads(g), [&]<class X>(const X* x) {
    for (int64_t grp = 0; grp < g.G; ++grp) {
      const gemm::ConvRows<X> a{forward_fields(g, x, grp)};
      const gemm::Matrix<T> wrows{wt.data<T>() + grp * g.Kg * g.RSCg, g.RSCg, 1};
      const gemm::Output o{yt.data<T>() + grp * g.Kg, yt.dtype(), g.P, g.Q, g.P * g.Q * g.K, g.Q * g.K, g.K, 1};
      gemm::Epilogue<Acc> ep;
      ep.bias = bias.defined() ? b32.data() + grp * g.Kg : nullptr;
      gemm::run<Acc>(g.N * g.P * g.Q, g.Kg, g.RSCg, a, wrows, o, ep, -1, &gemm::kernel_for_values<T>(g.Kg));
    }
  });
}

// The kernel taps that reach input rows of phase a (h = a + stride*i): r = first + step*n,
// n < count. Output row p = (h + pad - r*dil) / stride must be whole.
struct Taps {
  int64_t first = 0, step = 1, count = 0;
};

Taps phase_taps(int64_t a, int64_t R, int64_t stride, int64_t pad, int64_t dil) {
  Taps t;
  for (int64_t r = 0; r < R; ++r) {
    if (((a + pad - r * dil) % stride + stride) % stride != 0) continue;
    if (t.count == 0) t.first = r;
    if (t.count == 1) t.step = r - t.first;
    ++t.count;
  }
  return t;
}

// gx[n, h, w, c] = sum over taps (r, s) and filters k of gy[n, p, q, k] * w[k, r, s, c] with
// p = (h + ph - r*dh) / sh. Input rows h = a + sh*i (one phase a) see the taps r = first +
// step*n, and then p = (a + ph - first*dh)/sh + i - n*(step*dh/sh): an affine walk, so
// each phase is one implicit GEMM over gy with only the taps that reach it. The bias (one
// per input channel c) joins each sum in the epilogue.
// The direct input gradient: the stride-1 convolution of gy with the flipped filters, one
// group, few input channels, and padding within the kernel's reach.
bool direct_dgrad_fits(const Geometry& g) {
  return g.G == 1 && g.sh == 1 && g.sw == 1 && direct_wins(g.C) && g.W >= 4 &&
         (g.R - 1) * g.dh >= g.ph && (g.S - 1) * g.dw >= g.pw;
}

// gx[n, h, w, c] = sum over (r, s, k) of gy[n, h + ph - r*dh, w + pw - s*dw, k] * w[k, r, s, c]
// with the taps in the engine's order for one phase (dgrad_typed: r ascending, s
// descending, k innermost): on gy padded by (R-1)*dh - ph rows and (S-1)*dw - pw columns,
// tap (r, s) of output (h, w) reads padded row h + (R-1-r)*dh, column w + (S-1-s)*dw.
template <class T>
void direct_dgrad(const Geometry& g, const T* gy, const T* w, const float* bias, const Tensor& gxt) {
  thread_local direct::Padded img;
  const int64_t top = (g.R - 1) * g.dh - g.ph, left = (g.S - 1) * g.dw - g.pw;
  const int64_t Hp = g.H + (g.R - 1) * g.dh, Wp = g.W + (g.S - 1) * g.dw;
  if (direct::planar_layout(g.C, g.W))
    pad_into(img, gy, g.N, g.P, g.Q, g.K, top, left, Hp, Wp, true);
  else
    pad_by_rows(img, gy, g.N, g.P, g.Q, g.K, top, left, Hp, Wp);
  direct::Plan plan;
  plan.img = &img, plan.P = g.H, plan.Q = g.W, plan.sh = 1;
  std::vector<float> wt(static_cast<size_t>(g.C * g.R * g.S * g.K));  // [c][(r, s', k)], s' = S-1-s
  for (int64_t r = 0; r < g.R; ++r)
    for (int64_t ss = 0; ss < g.S; ++ss)
      for (int64_t k = 0; k < g.K; ++k) {
        plan.offsets.push_back(((g.R - 1 - r) * g.dh * Wp + ss * g.dw) * g.K + k);
        const int64_t t = (r * g.S + ss) * g.K + k, s = g.S - 1 - ss;
        for (int64_t c = 0; c < g.C; ++c)
          wt[static_cast<size_t>(c * g.R * g.S * g.K + t)] = load(w[((k * g.R + r) * g.S + s) * g.Cg + c]);
      }
  direct::pack_weights(plan, wt.data(), g.C, g.R * g.S * g.K);
  gemm::Epilogue<float> ep;
  ep.bias = bias;
  direct::run(plan, gemm::Output{gxt.data<T>(), gxt.dtype(), g.H, g.W, g.H * g.W * g.C, g.W * g.C, g.C, 1}, ep);
}

// Windows that tile the image exactly: stride = kernel, no padding, no dilation, one group
// (the decoder's 2x2 stride-2 transposed convolution, whose forward is this input gradient).
bool windows_tile(const Geometry& g) {
  return g.G == 1 && g.sh == g.R && g.sw == g.S && g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1 &&
         g.H == g.P * g.R && g.W == g.Q * g.S;
}

// The input gradient of tiling windows: input row h = R p + r is reached by kernel row r
// alone, so it is R plain products, one per kernel row, gx[n, R p + r, S q + s, c] = sum over
// k of gy[n, p, q, k] * w[k, r, s, c]: rows are gy's pixels (read as they lie), columns the
// S*C values (s, c), contiguous in gx and in w. The sums are the phase-by-phase engine's
// (one tap each, k ascending); only the column blocks differ: S times wider.
template <class T>
void tiling_dgrad(const Geometry& g, const T* gy, const T* w, const std::vector<compute_t<T>>& bias, const Tensor& gxt) {
  using Acc = compute_t<T>;
  const int64_t cols = g.S * g.C, row = g.W * g.C;
  std::vector<Acc> bias_cols;  // the bias of column (s, c) is bias[c]
  for (int64_t s = 0; s < g.S && !bias.empty(); ++s) bias_cols.insert(bias_cols.end(), bias.begin(), bias.end());
  gemm::Epilogue<Acc> ep;
  ep.bias = bias_cols.empty() ? nullptr : bias_cols.data();
  const gemm::Matrix<T> a{gy, g.K, 1};  // (pixel, filter)
  for (int64_t r = 0; r < g.R; ++r) {
    const gemm::Matrix<T> b{w + r * cols, 1, g.R * cols};  // (column (s, c), filter)
    const gemm::Output o{gxt.data<T>() + r * row, gxt.dtype(), g.N * g.P, g.Q, 0, g.R * row, cols, 1};
    gemm::run<Acc>(g.N * g.P * g.Q, cols, g.K, a, b, o, ep, -1, &gemm::kernel_for_values<T>(cols));
  }
}

template <class T>
void dgrad_typed(const Tensor& gyt, const Tensor& wt, const Tensor& bias, const Tensor& gxt, const Conv2dOptions& prm) {
  using Acc = compute_t<T>;
  const Geometry g = geometry(gxt, wt, gyt, prm);
  const std::vector<Acc> b32 = widened_bias<T>(bias);
  const T* w = wt.data<T>();
  if constexpr (on_tiles_type<T>())
    if (const amx_conv::Unit u = amx_conv::unit();
        tiles_dgrad_fit<T>(g, u) && amx_conv::dgrad<T>(u, amx_shape(g), gyt.data<T>(), w,
                                                       b32.empty() ? nullptr : b32.data(), gxt.data<T>(), op_threads()))
      return;
  if constexpr (std::is_same_v<Acc, float>)
    if (direct_dgrad_fits(g)) return direct_dgrad<T>(g, gyt.data<T>(), w, b32.empty() ? nullptr : b32.data(), gxt);
  if (windows_tile(g) && g.R * g.S > 1) return tiling_dgrad<T>(g, gyt.data<T>(), w, b32, gxt);
  std::vector<int64_t> koff;
  with_activation<T>(gyt, 0, g.R * g.S, [&]<class Y>(const Y* gy) {
    for (int64_t a = 0; a < std::min(g.sh, g.H); ++a)
      for (int64_t b = 0; b < std::min(g.sw, g.W); ++b) {
        const Taps tr = phase_taps(a, g.R, g.sh, g.ph, g.dh), ts = phase_taps(b, g.S, g.sw, g.pw, g.dw);
        const int64_t I = (g.H - a + g.sh - 1) / g.sh, J = (g.W - b + g.sw - 1) / g.sw;
        const int64_t taps = tr.count * ts.count * g.Kg;
        for (int64_t grp = 0; grp < g.G; ++grp) {
          // B^T: rows are input channels c, k runs over (r, s, filter) as the gather does.
          // The column taps run backwards (tap ss is s = first + (count-1-ss)*step), so
          // the gather walks gy's columns forwards and reads whole kernel rows at once.
          koff.resize(static_cast<size_t>(taps));
          for (int64_t rr = 0; rr < tr.count; ++rr)
            for (int64_t ss = 0; ss < ts.count; ++ss)
              for (int64_t k = 0; k < g.Kg; ++k)
                koff[static_cast<size_t>((rr * ts.count + ss) * g.Kg + k)] =
                    (((grp * g.Kg + k) * g.R + tr.first + rr * tr.step) * g.S + ts.first +
                     (ts.count - 1 - ss) * ts.step) * g.Cg;
          const int64_t dj = ts.step * g.dw / g.sw, oj = (b + g.pw - ts.first * g.dw) / g.sw - (ts.count - 1) * dj;
          const gemm::Matrix<T> wcols{w, 1, 0, koff.data()};
          const gemm::ConvRows<Y> gyf{{gy, g.P, g.Q, g.K, grp * g.Kg, g.Kg, tr.count, ts.count, I, J, 1,
                                       (a + g.ph - tr.first * g.dh) / g.sh, -(tr.step * g.dh / g.sh), 1, oj,
                                       ts.count > 1 ? dj : 1}};
          // A stride beyond the image leaves one row (column) per phase, whose step is never
          // taken: 0 then, since sh * W * C may not even fit in int64 (a fuzzed transposed conv).
          const gemm::Output o{gxt.data<T>() + (a * g.W + b) * g.C + grp * g.Cg, gxt.dtype(), I, J, g.H * g.W * g.C,
                               I > 1 ? g.sh * g.W * g.C : 0, J > 1 ? g.sw * g.C : 0, 1};
          // A phase no tap reaches gets a sum of nothing: zeros (plus the bias).
          gemm::Epilogue<Acc> ep;
          ep.bias = b32.empty() ? nullptr : b32.data() + grp * g.Cg;
          gemm::run<Acc>(g.N * I * J, g.Cg, taps, gyf, wcols, o, ep, -1, &gemm::kernel_for_values<T>(g.Cg));
        }
      }
  });
}

// Pixels per chunk of the weight gradient's reduction: a function of the shape only (never
// of the thread count), at least 512, at most 64 chunks, partials within ~64 MiB.
int64_t wgrad_chunk(int64_t pixels, int64_t wsize, int64_t acc_bytes) {
  const int64_t by_count = (pixels + 63) / 64;
  const int64_t max_chunks = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(1, wsize * acc_bytes));
  const int64_t by_memory = (pixels + max_chunks - 1) / max_chunks;
  return std::max({int64_t{512}, by_count, by_memory});
}

// gw = the sum of the chunks' partials part[c * wsize + e] in chunk order, rounded once.
template <class Acc>
void sum_chunks(const Acc* part, int64_t chunks, int64_t wsize, const Tensor& gwt) {
  const gemm::Output o{gwt.data_ptr(), gwt.dtype(), 1, 1, 0, 0, 0, 1};
  const int64_t block = gemm::NC;
  parallel_static(wsize * chunks < (1 << 16) ? 1 : op_threads(), (wsize + block - 1) / block, [&](int64_t eb) {
    const int64_t e0 = eb * block, n = std::min(block, wsize - e0);
    Acc sum[gemm::NC];
    std::copy_n(part + e0, n, sum);
    for (int64_t c = 1; c < chunks; ++c)
      for (int64_t e = 0; e < n; ++e) sum[e] += part[c * wsize + e0 + e];
    gemm::store_tile<Acc>(sum, 0, 0, 1, e0, n, o, gemm::Epilogue<Acc>{});
  });
}

// The direct weight gradient (conv2d_direct.h): one group, unit column dilation, and 8 or 16
// filters, or on AVX-512 32-64 filters when the reduction has a chunk for every thread (it
// runs a chunk on one thread; the outer-product driver splits a lone chunk's columns).
// Measured on an AVX2 EPYC (bench/conv_wgrad --width 8 / 16, 2 threads) against the
// outer-product driver: 8 filters 1.6-5.6x faster; 16 filters 1.3-6.4x (16->16 @64: 94 -> 153
// GFLOP/s; the first layer 1->16: 14 -> 90). On an AVX-512 Xeon (model 207, 2 threads, best
// of 2): 32 filters 1.1-1.6x (3x3 16->32 @16 165 -> 255 GFLOP/s), 64 filters 1.0-1.3x (1x1
// 128->64 @8 195 -> 258); 128 filters at 4x4 lost 2-3x (one chunk), so they stay outer.
// The tiles read f32 copies of the whole image and gy: for f16/bf16 where each value is read
// once (1x1, 2x2 stride 2) and 32+ filters, the outer-product driver, which widens inside
// its packing, wins (Ice Lake, w32 bf16, 2 threads: 1x1 64->32 @128 8.5 -> 5.0 ms, 128->64
// @64 5.4 -> 3.7, 2x2s2 32->64 @128 5.5 -> 3.7); fewer filters stay direct.
template <class T>
bool direct_wgrad_fits(const Geometry& g, int64_t chunks, int threads) {
  const bool tiles = g.K <= 8 || g.K == 16 || (g.K <= 64 && chunks >= threads && direct::wgrad_tiles_for(g.K));
  const bool copies_pay = std::is_same_v<T, float> || field_reads(g) > 1 || g.K < 32;
  return g.G == 1 && tiles && copies_pay && (g.dw == 1 || g.S == 1);
}

// Whether the weight gradient goes to the matrix unit (wgrad_on_unit). Measured on a Xeon with
// AMX (2026-12-06; one thread, bench/cpu_kernels, 3x3 layers): bf16 on AMX wins from 64 filters
// (32->64 @16: 138 -> 178 GFLOP/s, 64->128 @8: 119 -> 220, 128->256 @4: 99 -> 159) and lost
// below (16->16 @64: 107 -> 49, 32->32 @32: 121 -> 116: the f32 tiles' packing is cheaper for
// few filters); f16 (four tile products per product) from 128 (64->128: 124 -> 152; 32->64
// lost 124 -> 113).
bool wgrad_unit_wins(const Geometry& g, const gemm::Kernel<float>& unit) {
  return unit.repack_a != nullptr && g.Kg >= (unit.terms == 1 ? 64 : 128);
}

// The weight gradient's chunks: for each chunk of pixels (in parallel, one thread each; or the
// lone chunk with all threads) and group, product(taps, gy_offset, pixels, out, threads), where
// taps are the chunk's im2col rows (ConvTaps, k = pixels), gy_offset the chunk's first gy value
// of the group, out the chunk's partial [Kg, RSCg]; then the partials summed in chunk order.
template <class T, class Acc, class Product>
void wgrad_chunks(const Geometry& g, const Tensor& xt, const Tensor& gwt, int64_t chunk, int64_t chunks, Acc* part,
                  int threads, Product&& product) {
  const int64_t pixels = g.N * g.P * g.Q, wsize = g.K * g.RSCg;
  with_activation<T>(xt, 0, field_reads(g), [&]<class X>(const X* x) {
    parallel_dynamic(chunks > 1 ? threads : 1, chunks, [&](int64_t c) {
      const int64_t m0 = c * chunk, len = std::min(chunk, pixels - m0);
      for (int64_t grp = 0; grp < g.G; ++grp) {
        gemm::ConvTaps<X> taps{forward_fields(g, x, grp)};
        taps.m_base = m0;
        product(taps, m0 * g.K + grp * g.Kg, len, part + c * wsize + grp * g.Kg * g.RSCg, chunks > 1 ? 1 : threads);
      }
    });
  });
  sum_chunks(part, chunks, wsize, gwt);
}

// The weight gradient of f16/bf16 tensors where the engine multiplies them on a matrix unit
// (AMX): per chunk of pixels and group, one engine product gw_chunk [Kg, RSCg] = gy^T (rows:
// the group's filters, k: the chunk's pixels) · taps (rows: the RSCg taps, k: pixels, packed
// by ConvTaps as for the outer-product driver), into the chunk's f32 partial; the partials
// are summed in chunk order as on every other path. The chunks (and with them the results)
// do not depend on the thread count. See docs/benchmark.md, kernel table.
template <class T>
void wgrad_on_unit(const Geometry& g, const Tensor& gyt, const Tensor& xt, const Tensor& gwt,
                   const gemm::Kernel<float>& unit, int64_t chunk, int64_t chunks, float* part, int threads) {
  const T* gy = gyt.data<T>();
  wgrad_chunks<T>(g, xt, gwt, chunk, chunks, part, threads,
                  [&](const auto& taps, int64_t off, int64_t len, float* out, int inner) {
                    const gemm::Matrix<T> filters{gy + off, 1, g.K};  // (filter, pixel)
                    const gemm::Output o{out, DType::f32, 1, g.Kg, 0, 0, g.RSCg, 1};
                    gemm::run<float>(g.Kg, g.RSCg, len, filters, taps, o, gemm::Epilogue<float>{}, inner, &unit);
                  });
}

// gw [Kg, RSCg] = gy^T · im2col(x) per group, in fixed chunks of pixels; the chunks' f32
// partials are summed in chunk order and rounded once. Each chunk is one product of the
// outer-product driver (gemm/outer.h): per pixel, the group's filters of gy (broadcast rows)
// times the pixel's taps (vector columns), both packed as they lie in memory.
template <class T>
void wgrad_typed(const Tensor& gyt, const Tensor& xt, const Tensor& gwt, const Conv2dOptions& prm) {
  using Acc = compute_t<T>;
  const Geometry g = geometry(xt, gwt, gyt, prm);
  const int64_t pixels = g.N * g.P * g.Q, wsize = g.K * g.RSCg;
  const int64_t chunk = wgrad_chunk(pixels, wsize, sizeof(Acc)), chunks = (pixels + chunk - 1) / chunk;
  thread_local std::vector<Acc> partial;
  if (static_cast<int64_t>(partial.size()) < chunks * wsize) partial.resize(static_cast<size_t>(chunks * wsize));
  Acc* part = partial.data();
  const int threads = op_threads();
  if constexpr (on_tiles_type<T>())
    if (const amx_conv::Unit u = amx_conv::unit();
        tiles_wgrad_fit<T>(g, u) && amx_conv::wgrad<T>(u, amx_shape(g), gyt.data<T>(), xt.data<T>(), gwt.data<T>(), threads))
      return;
  if constexpr (std::is_same_v<Acc, float> && !std::is_same_v<T, float>)
    if (const gemm::Kernel<float>& unit = gemm::kernel_for_values<T>(); wgrad_unit_wins(g, unit))
      return wgrad_on_unit<T>(g, gyt, xt, gwt, unit, chunk, chunks, part, threads);
  if constexpr (std::is_same_v<Acc, float>)
    if (pointwise_fits(g) && pointwise::wgrad_fits(g.K, g.C)) {
      parallel_dynamic(threads, chunks, [&](int64_t c) {
        pointwise::wgrad_chunk<T>(gyt.data<T>(), xt.data<T>(), c * chunk, std::min(chunk, pixels - c * chunk), g.K, g.C,
                                  part + c * wsize);
      });
      return sum_chunks(part, chunks, wsize, gwt);
    }
  if constexpr (std::is_same_v<Acc, float>)
    if (direct_wgrad_fits<T>(g, chunks, threads)) {
      const float* gy = activation<T>(gyt, 1);
      thread_local direct::Padded img;
      const int64_t Hp = std::max(g.H + g.ph, (g.P - 1) * g.sh + (g.R - 1) * g.dh + 1);
      const int64_t Wp = std::max(g.W + g.pw, (g.Q - 1) * g.sw + g.S);
      pad_by_rows(img, xt.data<T>(), g.N, g.H, g.W, g.C, g.ph, g.pw, Hp, Wp);
      // Fewer than 8 filters (a segmentation head's classes): gy padded to 8 with zeros, so a
      // tile's vector load stays inside it; only the real filters' sums are stored.
      thread_local std::vector<float> gy8;
      const float* gyp = gy;
      if (g.K < 8) {
        gy8.resize(static_cast<size_t>(pixels * 8));
        for (int64_t m = 0; m < pixels; ++m) {
          float* d = gy8.data() + m * 8;
          for (int64_t f = 0; f < 8; ++f) d[f] = f < g.K ? gy[m * g.K + f] : 0.0f;
        }
        gyp = gy8.data();
      }
      const direct::WgradPlan plan{&img, g.P, g.Q, g.sh, g.sw, g.dh, g.R, g.S, gyp, g.K < 8 ? 8 : g.K,
                                   g.K < 8 ? 8 : g.K, g.K};
      parallel_dynamic(threads, chunks, [&](int64_t c) {
        direct::wgrad_chunk(plan, c * chunk, std::min(chunk, pixels - c * chunk), part + c * wsize);
      });
      return sum_chunks(part, chunks, wsize, gwt);
    }
  const gemm::OuterKernel<Acc>* kn;
  if constexpr (std::is_same_v<Acc, double>)
    kn = &gemm::f64_outer_kernel();
  else
    kn = &gemm::outer_kernel_for(g.Kg, g.RSCg);
  // gy is packed once per column block, each value read once: widened as it is packed.
  const T* gy = gyt.data<T>();
  wgrad_chunks<T>(g, xt, gwt, chunk, chunks, part, threads,
                  [&](const auto& taps, int64_t off, int64_t len, Acc* out, int inner) {
                    const gemm::ColumnRuns<T> gy_filters{gy + off, g.K};  // rows: filters; k: pixels
                    gemm::run_outer<Acc>(g.Kg, g.RSCg, len, gy_filters, taps, out, g.RSCg, inner, *kn);
                  });
}

void conv2d_forward_cpu(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, const Conv2dOptions& p) {
  visit_floating(y.dtype(), "conv2d", [&]<typename T>() { forward_typed<T>(x, w, b, y, p); });
}
void conv2d_dgrad_cpu(const Tensor& gy, const Tensor& w, const Tensor& b, const Tensor& gx, const Conv2dOptions& p) {
  visit_floating(gx.dtype(), "conv2d (input gradient)", [&]<typename T>() { dgrad_typed<T>(gy, w, b, gx, p); });
}
void conv2d_wgrad_cpu(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dOptions& p) {
  visit_floating(gw.dtype(), "conv2d (weight gradient)", [&]<typename T>() { wgrad_typed<T>(gy, x, gw, p); });
}

}  // namespace

HG_REGISTER_KERNEL(conv2d_forward_stub, cpu, conv2d_forward_cpu);
HG_REGISTER_KERNEL(conv2d_dgrad_stub, cpu, conv2d_dgrad_cpu);
HG_REGISTER_KERNEL(conv2d_wgrad_stub, cpu, conv2d_wgrad_cpu);

}  // namespace hg::cpu
