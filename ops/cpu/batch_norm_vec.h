// BatchNorm's vector row forms, written once over a lane type V: vec::F8 (8 f32 lanes, AVX2;
// instantiated in batch_norm_cpu.cpp) and vec::Z16 (16 lanes, AVX-512; instantiated only in
// batch_norm_avx512.cpp, under its target). Channel vector by channel vector (columns
// L k .. L k + L - 1, L = V::kLanes), rows in order: each channel's sums take the order of the
// scalar forms in batch_norm_rows.h, so every form gives the same bits. T is the storage type
// (f32/f16/bf16), read and written directly; per-channel arrays are f32; C is a multiple of L.
// Everything here depends on V, so the two targets' instantiations never share a symbol.
#pragma once
#include <cstdint>
#include <type_traits>

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

// The mask of relu's backward: where relu's output y = relu(v) as the forward stored it (v =
// (x - mean) * scale + shift, rounded to T) is > 0. A positive v stores as +0 where it is at
// most half T's smallest subnormal (round to nearest, ties to even): f16 2^-25, bf16 2^-134;
// f32 stores v itself. NaN compares false, as the stored NaN would.
template <class T>
constexpr float kStoredZeroBelow = std::is_same_v<T, half> ? 0x1p-25f : std::is_same_v<T, bfloat16> ? 0x1p-134f : 0.0f;

template <class V, class T>
auto stored_positive(V v) {
  return v > V(kStoredZeroBelow<T>);
}

// g's lanes at offset o, or with relu (its factors non-null) relu's backward of them: g where
// relu's output, recomputed from d = x - mean, is > 0, else +0 (the values relu_grad would have
// stored, widened). s, b: the lanes' scale and shift.
template <class V, class T>
V grad_at(const T* g, int64_t o, V d, bool relu, V s, V b) {
  const V gv = V::operand(g + o);
  return relu ? select(stored_positive<V, T>(d * s + b), gv, V(0.0f)) : gv;
}

template <class V, class T>
void grad_sums(const T* g, const T* x, int64_t n, int64_t C, const float* mean, float* part, ReluOf<float> relu) {
  constexpr int64_t L = V::kLanes;
  const bool r = relu.scale != nullptr;
  for (int64_t k = 0; k < C / L; ++k) {
    const V m = V::load(mean + L * k);
    const V s = r ? V::load(relu.scale + L * k) : V(0.0f), b = r ? V::load(relu.shift + L * k) : V(0.0f);
    V a(0.0f), q(0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t o = i * C + L * k;
      const V d = V::operand(x + o) - m;
      const V gv = grad_at<V>(g, o, d, r, s, b);
      a = a + gv;
      q = q + gv * d;
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

// out = k1 * g + k2 * (x - mean) + k3 (training), or k1 * g (k2 null: evaluation); g masked
// by relu's output where relu's factors are given (x is read for the mask in both modes).
template <class V, class T>
void input_grad(const T* g, const T* x, int64_t n, int64_t C, const float* mean, const float* k1, const float* k2,
                const float* k3, T* out, ReluOf<float> relu) {
  constexpr int64_t L = V::kLanes;
  const bool r = relu.scale != nullptr;
  for (int64_t k = 0; k < C / L; ++k) {
    const V a = V::load(k1 + L * k), m = V::load(mean + L * k);
    const V s = r ? V::load(relu.scale + L * k) : V(0.0f), sh = r ? V::load(relu.shift + L * k) : V(0.0f);
    if (k2) {
      const V b = V::load(k2 + L * k), c = V::load(k3 + L * k);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t o = i * C + L * k;
        const V d = V::operand(x + o) - m;
        V::store(out + o, a * grad_at<V>(g, o, d, r, s, sh) + b * d + c);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t o = i * C + L * k;
        const V d = r ? V::operand(x + o) - m : V(0.0f);
        V::store(out + o, a * grad_at<V>(g, o, d, r, s, sh));
      }
    }
  }
}

template <class V, class T>
VecRows<T> table() {
  return {V::kLanes,       &sums<V, T>,         &deviation_sums<V, T>, &grad_sums<V, T>,
          &affine<V, false, T>, &affine<V, true, T>, &input_grad<V, T>};
}

}  // namespace hg::cpu::bn::lanes
