// BatchNorm's work on one block of n contiguous [n, C] rows, in two forms that give the
// same bits: scalar loops on rows already widened to the compute type, and (f32/f16/bf16,
// C a multiple of 8) F8 lanes reading and writing the storage type directly, each
// accumulator in a register instead of memory, every channel's rows summed in the same order.
#pragma once
#include <algorithm>
#include <cstdint>

#include "ops/cpu/vec/map8.h"

namespace hg::cpu::bn {

// Whether a block of T rows with C channels takes the F8 form.
template <class T>
bool use_v8(int64_t C) {
  return vec::kVec8<T> && C % 8 == 0;
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

#ifdef HG_VEC8
using vec::F8;
using vec::load8;
using vec::store8;

// The F8 forms, channel vector by channel vector (columns 8k .. 8k+7), rows in order.
// The storage-type pointers are the block's first row; per-channel arrays are f32.
inline F8 at8(const float* p, int64_t k) { return load8(p + 8 * k); }
// Every T value below is first an operand of + - * (which quiets a NaN): the cheaper load.
template <class T>
F8 ld(const T* p) {
  return vec::load8_operand(p);
}

template <class T>
void sums_v8(const T* x, int64_t n, int64_t C, float* part) {
  for (int64_t k = 0; k < C / 8; ++k) {
    F8 a(0.0f);
    for (int64_t i = 0; i < n; ++i) a = a + ld(x + i * C + 8 * k);
    store8(part + 8 * k, at8(part, k) + a);
  }
}

template <class T>
void deviation_sums_v8(const T* x, int64_t n, int64_t C, const float* mean, float* part) {
  for (int64_t k = 0; k < C / 8; ++k) {
    const F8 m = at8(mean, k);
    F8 a(0.0f), q(0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const F8 d = ld(x + i * C + 8 * k) - m;
      a = a + d;
      q = q + d * d;
    }
    store8(part + 8 * k, at8(part, k) + a);
    store8(part + C + 8 * k, at8(part + C, k) + q);
  }
}

// g's lanes, or with y (relu's output; null: none) relu's backward of them: g where y > 0, else
// +0 (the values relu_grad would have stored, widened).
template <class T>
F8 grad8(const T* g, const T* y, int64_t o) {
  const F8 gv = ld(g + o);
  return y ? select(ld(y + o) > F8(0.0f), gv, F8(0.0f)) : gv;
}

template <class T>
void grad_sums_v8(const T* g, const T* x, int64_t n, int64_t C, const float* mean, float* part, const T* y = nullptr) {
  for (int64_t k = 0; k < C / 8; ++k) {
    const F8 m = at8(mean, k);
    F8 a(0.0f), q(0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const F8 gv = grad8(g, y, i * C + 8 * k);
      a = a + gv;
      q = q + gv * (ld(x + i * C + 8 * k) - m);
    }
    store8(part + 8 * k, at8(part, k) + a);
    store8(part + C + 8 * k, at8(part + C, k) + q);
  }
}

template <bool Relu = false, class T>
void affine_v8(const T* x, int64_t n, int64_t C, const float* mean, const float* scale, const float* shift, T* y) {
  for (int64_t k = 0; k < C / 8; ++k) {
    const F8 m = at8(mean, k), s = at8(scale, k), b = at8(shift, k);
    for (int64_t i = 0; i < n; ++i) {
      F8 v = (ld(x + i * C + 8 * k) - m) * s + b;
      if constexpr (Relu) v = select(v > F8(0.0f), v, select(v != v, v, F8(0.0f)));
      store8(y + i * C + 8 * k, v);
    }
  }
}

template <class T>
void input_grad_v8(const T* g, const T* x, int64_t n, int64_t C, const float* mean, const float* k1,
                   const float* k2, const float* k3, T* out, const T* y = nullptr) {
  for (int64_t k = 0; k < C / 8; ++k) {
    const F8 a = at8(k1, k);
    if (x) {
      const F8 m = at8(mean, k), b = at8(k2, k), c = at8(k3, k);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t o = i * C + 8 * k;
        store8(out + o, a * grad8(g, y, o) + b * (ld(x + o) - m) + c);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) store8(out + i * C + 8 * k, a * grad8(g, y, i * C + 8 * k));
    }
  }
}
#endif

}  // namespace hg::cpu::bn
