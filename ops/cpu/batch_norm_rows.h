// BatchNorm's work on one block of n contiguous [n, C] rows: the scalar forms here, on rows
// already widened to the compute type, and the vector forms (batch_norm_vec.h: 8 or 16 f32
// lanes reading and writing f32/f16/bf16 directly, each accumulator in a register) that give
// the same bits, every channel's rows summed in the same order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "framework/dtype.h"

namespace hg::cpu::bn {

// The forward's per-channel factors, y = relu((x - mean) * scale + shift) rounded to T, from
// which the backward of batch_norm_relu recomputes relu's output for its mask; null: no relu.
template <class S>
struct ReluOf {
  const S* scale = nullptr;
  const S* shift = nullptr;
};

// One width's vector forms for T rows (see batch_norm_vec.h for each one's contract).
template <class T>
struct VecRows {
  using S = compute_t<T>;  // f32 for the lane types; VecRows<double> exists only as a type
  int64_t lanes;           // C must be a multiple
  void (*sums)(const T* x, int64_t n, int64_t C, S* part);
  void (*deviation_sums)(const T* x, int64_t n, int64_t C, const S* mean, S* part);
  void (*grad_sums)(const T* g, const T* x, int64_t n, int64_t C, const S* mean, S* part, ReluOf<S> relu);
  void (*affine)(const T* x, int64_t n, int64_t C, const S* mean, const S* scale, const S* shift, T* y);
  void (*affine_relu)(const T* x, int64_t n, int64_t C, const S* mean, const S* scale, const S* shift, T* y);
  void (*input_grad)(const T* g, const T* x, int64_t n, int64_t C, const S* mean, const S* k1, const S* k2,
                     const S* k3, T* out, ReluOf<S> relu);
};

template <class T>
inline constexpr bool kLaneType =
    std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Each width's forms for T in {f32, f16, bf16}, or null where this build (8 lanes: AVX2 and
// F16C) or this process's kernel path (16 lanes: hg::cpu::isa() avx512 or wider) lacks them.
template <class T>
const VecRows<T>* rows8();
template <class T>
const VecRows<T>* rows16();

// The forms a block of T rows with C channels takes: the widest whose lane count divides C,
// or null (f64, or C not a multiple of 8): the scalar forms.
template <class T>
const VecRows<T>* vec_rows(int64_t C) {
  if constexpr (kLaneType<T>) {
    if (const VecRows<T>* r = rows16<T>(); r && C % r->lanes == 0) return r;
    if (const VecRows<T>* r = rows8<T>(); r && C % r->lanes == 0) return r;
  }
  return nullptr;
}

// Each reduction sums its block into a zeroed per-block accumulator (`acc`, the width of
// `part`), then adds that into the chunk's partial sums: f32 error grows with the block
// size plus the number of blocks, not with the row count.
template <class S, class Row>
void sum_block(int64_t n, int64_t width, S* __restrict acc, S* __restrict part, Row&& row) {
  std::fill(acc, acc + width, S(0));
  for (int64_t i = 0; i < n; ++i) row(i, acc);
  for (int64_t w = 0; w < width; ++w) part[w] += acc[w];
}

// part[c] += sum of x[., c].
template <class S>
void sums(const S* __restrict x, int64_t n, int64_t C, S* acc, S* part) {
  sum_block<S>(n, C, acc, part, [&](int64_t i, S* __restrict a) {
    for (int64_t c = 0; c < C; ++c) a[c] += x[i * C + c];
  });
}

// part[c] += sum of d, part[C + c] += sum of d * d, d = x[., c] - mean[c].
template <class S>
void deviation_sums(const S* __restrict x, int64_t n, int64_t C, const S* mean, S* acc, S* part) {
  sum_block<S>(n, 2 * C, acc, part, [&](int64_t i, S* __restrict a) {
    for (int64_t c = 0; c < C; ++c) {
      const S d = x[i * C + c] - mean[c];
      a[c] += d;
      a[C + c] += d * d;
    }
  });
}

// part[c] += sum of g[., c], part[C + c] += sum of g * (x - mean[c]).
template <class S>
void grad_sums(const S* __restrict g, const S* __restrict x, int64_t n, int64_t C, const S* mean, S* acc,
               S* part) {
  sum_block<S>(n, 2 * C, acc, part, [&](int64_t i, S* __restrict a) {
    for (int64_t c = 0; c < C; ++c) {
      const S gv = g[i * C + c];
      a[c] += gv;
      a[C + c] += gv * (x[i * C + c] - mean[c]);
    }
  });
}

// relu's rule: v where v > 0, NaN stays NaN, else +0.
template <class S>
S relu_value(S v) {
  return v > S(0) || v != v ? v : S(0);
}

// y = (x - mean) * scale + shift per channel (Relu: then relu_value, before the one rounding,
// which gives relu's bits on the rounded value: rounding keeps the sign, NaN and zero).
template <bool Relu = false, class S>
void affine(const S* __restrict x, int64_t n, int64_t C, const S* mean, const S* scale, const S* shift,
            S* __restrict y) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < C; ++c) {
      const S v = (x[i * C + c] - mean[c]) * scale[c] + shift[c];
      y[i * C + c] = Relu ? relu_value(v) : v;
    }
}

// g = g where y > 0, else +0 (relu's backward, y its output), in place.
template <class S>
void relu_mask(S* __restrict g, const S* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = y[i] > S(0) ? g[i] : S(0);
}

// out = k1 * g + k2 * (x - mean) + k3 (training), or k1 * g (x null: evaluation).
template <class S>
void input_grad(const S* __restrict g, const S* __restrict x, int64_t n, int64_t C, const S* mean, const S* k1,
                const S* k2, const S* k3, S* __restrict out) {
  if (x) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < C; ++c)
        out[i * C + c] = k1[c] * g[i * C + c] + k2[c] * (x[i * C + c] - mean[c]) + k3[c];
  } else {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < C; ++c) out[i * C + c] = k1[c] * g[i * C + c];
  }
}


}  // namespace hg::cpu::bn
