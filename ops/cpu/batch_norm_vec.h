// BatchNorm's vector row forms, written once over a lane type V: vec::F8 (8 f32 lanes, AVX2;
// instantiated in batch_norm_cpu.cpp) and vec::Z16 (16 lanes, AVX-512; instantiated only in
// batch_norm_avx512.cpp, under its target). Channel vector by channel vector (columns
// L k .. L k + L - 1, L = V::kLanes), rows in order: each channel's sums take the order of the
// scalar forms in batch_norm_rows.h, so every form gives the same bits. T is the storage type
// (f32/f16/bf16), read and written directly; per-channel arrays are f32; C is a multiple of L.
// Everything here depends on V, so the two targets' instantiations never share a symbol.
#pragma once
#include <cstdint>

#include "ops/cpu/batch_norm_rows.h"

namespace hg::cpu::bn::lanes {

template <class V, class T>
void sums(const T* x, int64_t n, int64_t C, float* part) {
  constexpr int64_t L = V::kLanes;
  for (int64_t k = 0; k < C / L; ++k) {
    V a(0.0f);
    for (int64_t i = 0; i < n; ++i) a = a + V::operand(x + i * C + L * k);
    V::store(part + L * k, V::load(part + L * k) + a);
  }
}

template <class V, class T>
void deviation_sums(const T* x, int64_t n, int64_t C, const float* mean, float* part) {
  constexpr int64_t L = V::kLanes;
  for (int64_t k = 0; k < C / L; ++k) {
    const V m = V::load(mean + L * k);
    V a(0.0f), q(0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const V d = V::operand(x + i * C + L * k) - m;
      a = a + d;
      q = q + d * d;
    }
    V::store(part + L * k, V::load(part + L * k) + a);
    V::store(part + C + L * k, V::load(part + C + L * k) + q);
  }
}

// g's lanes, or with y (relu's output; null: none) relu's backward of them: g where y > 0, else
// +0 (the values relu_grad would have stored, widened).
template <class V, class T>
V grad_at(const T* g, const T* y, int64_t o) {
  const V gv = V::operand(g + o);
  return y ? select(V::operand(y + o) > V(0.0f), gv, V(0.0f)) : gv;
}

template <class V, class T>
void grad_sums(const T* g, const T* x, int64_t n, int64_t C, const float* mean, float* part, const T* y) {
  constexpr int64_t L = V::kLanes;
  for (int64_t k = 0; k < C / L; ++k) {
    const V m = V::load(mean + L * k);
    V a(0.0f), q(0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const V gv = grad_at<V>(g, y, i * C + L * k);
      a = a + gv;
      q = q + gv * (V::operand(x + i * C + L * k) - m);
    }
    V::store(part + L * k, V::load(part + L * k) + a);
    V::store(part + C + L * k, V::load(part + C + L * k) + q);
  }
}

template <class V, bool Relu, class T>
void affine(const T* x, int64_t n, int64_t C, const float* mean, const float* scale, const float* shift, T* y) {
  constexpr int64_t L = V::kLanes;
  for (int64_t k = 0; k < C / L; ++k) {
    const V m = V::load(mean + L * k), s = V::load(scale + L * k), b = V::load(shift + L * k);
    for (int64_t i = 0; i < n; ++i) {
      V v = (V::operand(x + i * C + L * k) - m) * s + b;
      if constexpr (Relu) v = select(v > V(0.0f), v, select(v != v, v, V(0.0f)));
      V::store(y + i * C + L * k, v);
    }
  }
}

template <class V, class T>
void input_grad(const T* g, const T* x, int64_t n, int64_t C, const float* mean, const float* k1, const float* k2,
                const float* k3, T* out, const T* y) {
  constexpr int64_t L = V::kLanes;
  for (int64_t k = 0; k < C / L; ++k) {
    const V a = V::load(k1 + L * k);
    if (x) {
      const V m = V::load(mean + L * k), b = V::load(k2 + L * k), c = V::load(k3 + L * k);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t o = i * C + L * k;
        V::store(out + o, a * grad_at<V>(g, y, o) + b * (V::operand(x + o) - m) + c);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) V::store(out + i * C + L * k, a * grad_at<V>(g, y, i * C + L * k));
    }
  }
}

template <class V, class T>
VecRows<T> table() {
  return {V::kLanes,       &sums<V, T>,         &deviation_sums<V, T>, &grad_sums<V, T>,
          &affine<V, false, T>, &affine<V, true, T>, &input_grad<V, T>};
}

}  // namespace hg::cpu::bn::lanes
