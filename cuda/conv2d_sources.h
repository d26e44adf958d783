// The operands of implicit-GEMM convolution as sources of the tensor-core GEMM engine
// (cuda/mma_operands.h states the contract). NHWC activations, [K, R, S, Cg] weights, one
// GEMM batch entry per group g (ConvShape in cuda/conv2d_indexing.h):
//   forward  y  [N*P*Q, Kg]      = im2col(x) [N*P*Q, R*S*Cg]  · w^T  [R*S*Cg, Kg]
//   dgrad    gx [N*H*W, Cg]      = gather(gy) [N*H*W, R*S*Kg] · w    [R*S*Kg, Cg]
//   wgrad    gw [Kg, R*S*Cg]     = gy^T [Kg, N*P*Q]           · im2col(x) [N*P*Q, R*S*Cg]
// A line of im2col (one output pixel) and of the gather (one input pixel) decodes its pixel
// once; a chunk of 8 (f16/bf16) or 4 (f32) columns inside one filter tap is contiguous in
// memory (channels are innermost) and becomes one 16-byte copy, or zeros where the tap falls
// in the padding (im2col) or reaches no output (gather). Chunks that straddle two taps
// (channel counts not a multiple of the chunk) and unaligned ones are read element by
// element: any channel count is right, multiples of 8 are fast. Column indices stay below
// 2^31 (conv_shape checks), so splitting them into (tap, channel) and taps into (r, s) per
// chunk takes FastDivmod's multiply-shifts, set up on the host with the source, instead of
// 64-bit divisions. Include from .cu only.
#pragma once
#include <cstdint>

#include "cuda/conv2d_indexing.h"
#include "cuda/fast_divmod.h"
#include "cuda/mma_gemm.h"

namespace hg::cuda {

// A column of im2col or of the gathers: a filter tap (r, s) and a channel, channels innermost.
struct TapColumn {
  int64_t r, s;
  uint32_t channel;
};

// chunk() of a source whose columns are TapColumns, from its column() and at(): contiguous
// within one tap, read element by element where it straddles two.
template <class T, class Src>
HG_DEVICE Chunk<T> tap_chunk(const Src& src, const typename Src::Line& l, int64_t j, int n, int64_t channels) {
  const TapColumn col = src.column(j);
  if (col.channel + n > channels) return {nullptr, ChunkKind::elements};
  const T* p = src.at(l, col);
  return {p, p ? ChunkKind::copy : ChunkKind::zero};
}

// im2col(x) of group g: rows are output pixels m = (n, p, q), columns kk = (r, s, c).
// KContiguous: the forward's A (lines are rows); otherwise the weight gradient's B (lines
// are rows too, i.e. along N, and a line runs along the GEMM's N axis = kk).
template <class T, bool KContiguous>
struct Im2colSource {
  using Element = T;
  static constexpr bool kContiguousK = KContiguous;
  struct Line {
    const T* base;  // x[n, 0, 0, g*Cg]
    int64_t h0, w0;  // the input position of tap (0, 0)
  };
  const T* x;
  ConvShape s;
  FastDivmod by_cg{s.Cg}, by_s{s.S};
  HG_DEVICE Line line(int64_t g, int64_t m) const {
    const int64_t q = m % s.Q, p = m / s.Q % s.P, n = m / (s.Q * s.P);
    return {x + n * s.H * s.W * s.C + g * s.Cg, p * s.sh - s.ph, q * s.sw - s.pw};
  }
  HG_DEVICE TapColumn column(int64_t kk) const {
    uint32_t tap, c, r, t;
    by_cg.divmod(static_cast<uint32_t>(kk), tap, c);
    by_s.divmod(tap, r, t);
    return {r, t, c};
  }
  // Address of the column's element, or nullptr in the padding.
  HG_DEVICE const T* at(const Line& l, const TapColumn& col) const {
    const int64_t h = l.h0 + col.r * s.dh, w = l.w0 + col.s * s.dw;
    if (h < 0 || h >= s.H || w < 0 || w >= s.W) return nullptr;
    return l.base + (h * s.W + w) * s.C + col.channel;
  }
  HG_DEVICE const T* element(const Line& l, int64_t kk) const { return at(l, column(kk)); }
  HG_DEVICE Chunk<T> chunk(const Line& l, int64_t kk, int n) const { return tap_chunk<T>(*this, l, kk, n, s.Cg); }
};

// The weights of group g as the forward's B: line kf (a filter) runs along kk = (r, s, c),
// contiguous in [K, R, S, Cg].
template <class T>
struct FilterSource {
  using Element = T;
  using Line = const T*;
  static constexpr bool kContiguousK = true;
  const T* w;
  int64_t Kg, RSCg;
  HG_DEVICE Line line(int64_t g, int64_t kf) const { return w + (g * Kg + kf) * RSCg; }
  HG_DEVICE Chunk<T> chunk(Line l, int64_t e, int) const { return {l + e, ChunkKind::copy}; }
  HG_DEVICE const T* element(Line l, int64_t e) const { return l + e; }
};

// gather(gy) of group g, the input gradient's A: rows are input pixels m = (n, h, w),
// columns j = (r, s, k); column j holds the output gradient that reaches (h, w) through tap
// (r, s) of filter k, or zero where no output position does.
template <class T>
struct GatherSource {
  using Element = T;
  static constexpr bool kContiguousK = true;
  struct Line {
    const T* base;  // gy[n, 0, 0, g*Kg]
    int64_t h, w;
  };
  const T* gy;
  ConvShape s;
  FastDivmod by_kg{s.Kg}, by_s{s.S}, by_sh{s.sh}, by_sw{s.sw};
  HG_DEVICE Line line(int64_t g, int64_t m) const {
    const int64_t w = m % s.W, h = m / s.W % s.H, n = m / (s.W * s.H);
    return {gy + n * s.P * s.Q * s.K + g * s.Kg, h, w};
  }
  // output_reading (conv2d_indexing.h) with the stride's division precomputed.
  HG_DEVICE static int64_t reading(int64_t i, int64_t t, const FastDivmod& stride, int64_t pad, int64_t dilation,
                                   int64_t out) {
    const int64_t num = i + pad - t * dilation;
    if (num < 0) return -1;
    uint32_t o, rest;
    stride.divmod(static_cast<uint32_t>(num), o, rest);
    return rest != 0 || o >= out ? -1 : int64_t{o};
  }
  HG_DEVICE TapColumn column(int64_t j) const {
    uint32_t tap, k, r, t;
    by_kg.divmod(static_cast<uint32_t>(j), tap, k);
    by_s.divmod(tap, r, t);
    return {r, t, k};
  }
  HG_DEVICE const T* at(const Line& l, const TapColumn& col) const {
    const int64_t p = reading(l.h, col.r, by_sh, s.ph, s.dh, s.P);
    const int64_t q = reading(l.w, col.s, by_sw, s.pw, s.dw, s.Q);
    if (p < 0 || q < 0) return nullptr;
    return l.base + (p * s.Q + q) * s.K + col.channel;
  }
  HG_DEVICE const T* element(const Line& l, int64_t j) const { return at(l, column(j)); }
  HG_DEVICE Chunk<T> chunk(const Line& l, int64_t j, int n) const { return tap_chunk<T>(*this, l, j, n, s.Kg); }
};

// The weights of group g as the input gradient's B, [R*S*Kg, Cg]: line j = (r, s, k) runs
// along the input channels c (the GEMM's N axis), contiguous in [K, R, S, Cg].
template <class T>
struct FilterRowsSource {
  using Element = T;
  using Line = const T*;
  static constexpr bool kContiguousK = false;
  const T* w;
  ConvShape s;
  FastDivmod by_kg{s.Kg};
  HG_DEVICE Line line(int64_t g, int64_t j) const {
    uint32_t tap, k;
    by_kg.divmod(static_cast<uint32_t>(j), tap, k);
    return w + ((g * s.Kg + k) * s.R * s.S + tap) * s.Cg;
  }
  HG_DEVICE Chunk<T> chunk(Line l, int64_t c, int) const { return {l + c, ChunkKind::copy}; }
  HG_DEVICE const T* element(Line l, int64_t c) const { return l + c; }
};

// The input gradient of one stride phase (DgradPhase, conv2d_indexing.h), for stride > 1:
//   gx[phase rows (n, hi, wi), Cg] = gather [rows, Rp*Sp*Kg] · w [Rp*Sp*Kg, Cg]
// with h = a + hi * sh, w = b + wi * sw, and columns j = (ri, si, k) for taps
// r = r0 + ri * r_step, s = s0 + si * s_step, which all reach the row's pixel exactly. Row
// indices stay below N*H*W < 2^31 (the caller checks), so they decode by FastDivmod too.
struct PhaseIndex {
  ConvShape s;
  DgradPhase ph;
  FastDivmod by_kg{s.Kg}, by_sp{ph.Sp > 0 ? ph.Sp : 1}, by_wp{ph.Wp > 0 ? ph.Wp : 1}, by_hp{ph.Hp > 0 ? ph.Hp : 1}, by_sh{s.sh}, by_sw{s.sw};
  // Input pixel of phase row m: its batch entry n and position (h, w).
  HG_DEVICE void pixel(int64_t m, int64_t& n, int64_t& h, int64_t& w) const {
    uint32_t rest, wi, hi;
    by_wp.divmod(static_cast<uint32_t>(m), rest, wi);
    uint32_t nn;
    by_hp.divmod(rest, nn, hi);
    n = nn, h = ph.a + int64_t{hi} * s.sh, w = ph.b + int64_t{wi} * s.sw;
  }
  // Column j's tap (r, s) and filter k.
  HG_DEVICE TapColumn column(int64_t j) const {
    uint32_t tap, k, ri, si;
    by_kg.divmod(static_cast<uint32_t>(j), tap, k);
    by_sp.divmod(tap, ri, si);
    return {ph.r0 + int64_t{ri} * ph.r_step, ph.s0 + int64_t{si} * ph.s_step, k};
  }
};

template <class T>
struct PhaseGatherSource {
  using Element = T;
  static constexpr bool kContiguousK = true;
  using Line = typename GatherSource<T>::Line;  // the input pixel, as the plain gather's
  const T* gy;
  PhaseIndex ix;
  HG_DEVICE Line line(int64_t g, int64_t m) const {
    int64_t n, h, w;
    ix.pixel(m, n, h, w);
    return {gy + n * ix.s.P * ix.s.Q * ix.s.K + g * ix.s.Kg, h, w};
  }
  HG_DEVICE TapColumn column(int64_t j) const { return ix.column(j); }
  // The tap reaches the pixel exactly (num % stride == 0 by the phase); only the output's
  // borders remain to check.
  HG_DEVICE const T* at(const Line& l, const TapColumn& col) const {
    const ConvShape& s = ix.s;
    const int64_t num_h = l.h + s.ph - col.r * s.dh, num_w = l.w + s.pw - col.s * s.dw;
    if (num_h < 0 || num_w < 0) return nullptr;
    const int64_t p = ix.by_sh.div(static_cast<uint32_t>(num_h)), q = ix.by_sw.div(static_cast<uint32_t>(num_w));
    if (p >= s.P || q >= s.Q) return nullptr;
    return l.base + (p * s.Q + q) * s.K + col.channel;
  }
  HG_DEVICE const T* element(const Line& l, int64_t j) const { return at(l, column(j)); }
  HG_DEVICE Chunk<T> chunk(const Line& l, int64_t j, int n) const { return tap_chunk<T>(*this, l, j, n, ix.s.Kg); }
};

// The phase's weights as its B, [Rp*Sp*Kg, Cg]: line j = (ri, si, k) along c.
template <class T>
struct PhaseFilterRowsSource {
  using Element = T;
  using Line = const T*;
  static constexpr bool kContiguousK = false;
  const T* w;
  PhaseIndex ix;
  HG_DEVICE Line line(int64_t g, int64_t j) const {
    const TapColumn col = ix.column(j);
    const ConvShape& s = ix.s;
    return w + (((g * s.Kg + col.channel) * s.R + col.r) * s.S + col.s) * s.Cg;
  }
  HG_DEVICE Chunk<T> chunk(Line l, int64_t c, int) const { return {l + c, ChunkKind::copy}; }
  HG_DEVICE const T* element(Line l, int64_t c) const { return l + c; }
};

// Stores the phase's rows at their pixels of gx [N, H, W, C] (one rounding, as Epilogue).
template <class T>
struct PhaseEpilogue {
  T* gx;
  PhaseIndex ix;
  HG_DEVICE void operator()(int64_t g, int64_t m, int64_t c, float acc) const {
    int64_t n, h, w;
    ix.pixel(m, n, h, w);
    const ConvShape& s = ix.s;
    gx[((n * s.H + h) * s.W + w) * s.C + g * s.Cg + c] = dev_store<T>(acc);
  }
};

}  // namespace hg::cuda
