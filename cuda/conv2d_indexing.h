// Where the implicit-GEMM convolution kernels read: the im2col element of an output pixel
// (forward, weight gradient) and its transpose, the output-gradient element an input pixel
// gathers (input gradient). Host and device functions, so host tests check the maps.
#pragma once
#include <cstdint>

#include "cuda/primitives/common.h"

namespace hg::cuda {

// x [N, H, W, C], w [K, R, S, Cg], y [N, P, Q, K]; G groups of Cg input and Kg output channels.
struct ConvShape {
  int64_t N, H, W, C, K, R, S, P, Q, G, Cg, Kg;
  int64_t sh, sw, ph, pw, dh, dw;
};

// Offset in x of column kk = (r, s, c) of output pixel m = (n, p, q) in group g, or -1 where
// the tap falls in the padding.
HG_HOST_DEVICE int64_t im2col_offset(const ConvShape& s, int64_t g, int64_t m, int64_t kk) {
  const int64_t q = m % s.Q, p = m / s.Q % s.P, n = m / (s.Q * s.P);
  const int64_t c = kk % s.Cg, tap = kk / s.Cg, ks = tap % s.S, kr = tap / s.S;
  const int64_t h = p * s.sh - s.ph + kr * s.dh, w = q * s.sw - s.pw + ks * s.dw;
  if (h < 0 || h >= s.H || w < 0 || w >= s.W) return -1;
  return ((n * s.H + h) * s.W + w) * s.C + g * s.Cg + c;
}

// The output position that tap t reaches from input position i along one axis
// (i = o*stride - pad + t*dilation solved for o), or -1 when none does.
HG_HOST_DEVICE int64_t output_reading(int64_t i, int64_t t, int64_t stride, int64_t pad, int64_t dilation,
                                      int64_t out) {
  const int64_t num = i + pad - t * dilation;
  if (num < 0 || num % stride != 0 || num / stride >= out) return -1;
  return num / stride;
}

// Offset in gy of column j = (r, s, k) of input pixel m = (n, h, w) in group g: the output
// gradient that reaches x[n, h, w, g*Cg + c] through weight w[g*Kg + k, r, s, c], or -1.
HG_HOST_DEVICE int64_t dgrad_gather_offset(const ConvShape& s, int64_t g, int64_t m, int64_t j) {
  const int64_t w = m % s.W, h = m / s.W % s.H, n = m / (s.W * s.H);
  const int64_t k = j % s.Kg, tap = j / s.Kg, ks = tap % s.S, kr = tap / s.S;
  const int64_t p = output_reading(h, kr, s.sh, s.ph, s.dh, s.P);
  const int64_t q = output_reading(w, ks, s.sw, s.pw, s.dw, s.Q);
  if (p < 0 || q < 0) return -1;
  return ((n * s.P + p) * s.Q + q) * s.K + g * s.Kg + k;
}

// Offset in w of the weight that column j = (r, s, k) of dgrad multiplies into input channel c.
HG_HOST_DEVICE int64_t dgrad_weight_offset(const ConvShape& s, int64_t g, int64_t j, int64_t c) {
  const int64_t k = j % s.Kg, tap = j / s.Kg;
  return ((g * s.Kg + k) * s.R * s.S + tap) * s.Cg + c;
}

// With stride > 1 an input pixel is reached only by the taps congruent to it: input pixels
// fall into sh * sw phases (h % sh, w % sw), and the dgrad of one phase is a GEMM over the
// taps that reach it alone (r = r0 + i * r_step, i < Rp; likewise s), instead of every tap
// with the others' products zero. A phase with Rp or Sp 0 gets zeros.
struct DgradPhase {
  int64_t a, b;    // h % sh and w % sw of the phase's input pixels
  int64_t Hp, Wp;  // how many input rows and columns the phase has
  int64_t r0, r_step, Rp, s0, s_step, Sp;
};

// The taps t < taps with (i + pad - t * dilation) % stride == 0 for i % stride == phase: an
// arithmetic progression (first, step, count).
inline void dgrad_phase_taps(int64_t phase, int64_t stride, int64_t pad, int64_t dilation, int64_t taps,
                             int64_t& first, int64_t& step, int64_t& count) {
  first = -1, count = 0, step = 1;
  for (int64_t t = 0; t < taps; ++t) {
    if ((phase + pad - t * dilation) % stride != 0) continue;
    if (count == 0) first = t;
    else if (count == 1) step = t - first;
    ++count;
  }
}

inline DgradPhase dgrad_phase(const ConvShape& s, int64_t a, int64_t b) {
  DgradPhase p{};
  p.a = a, p.b = b;
  p.Hp = s.H > a ? (s.H - a + s.sh - 1) / s.sh : 0;
  p.Wp = s.W > b ? (s.W - b + s.sw - 1) / s.sw : 0;
  dgrad_phase_taps(a, s.sh, s.ph, s.dh, s.R, p.r0, p.r_step, p.Rp);
  dgrad_phase_taps(b, s.sw, s.pw, s.dw, s.S, p.s0, p.s_step, p.Sp);
  return p;
}

}  // namespace hg::cuda
