// F8, eight f32 lanes in one AVX register, with the operators and helpers (select, lanes,
// sqrt, fabs) that elementwise bodies use, so one generic lambda body serves a scalar C
// and a vector of 8. Each helper is the exact IEEE operation the scalar body performs.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "framework/half_convert_x86.h"

#if defined(__AVX2__) && defined(__F16C__)
#define HG_VEC8 1
#endif

namespace hg::cpu::vec {

// Scalar forms of the helpers, so a generic body also compiles for float, double, int64_t.
template <class C>
inline C select(bool m, C a, C b) {
  return m ? a : b;
}
template <class C, class F>
inline decltype(auto) lanes(C v, F&& f) {
  return f(v);
}
template <class C, class F>
inline decltype(auto) lanes(C a, C b, F&& f) {
  return f(a, b);
}
template <class C>
inline C fabs_of(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::fabs(v);
  else return v < C(0) ? C(-v) : v;
}
template <class C>
inline auto sqrt_of(C v) {
  return std::sqrt(v);  // f64 for integers, as std::sqrt
}

#ifdef HG_VEC8

struct M8 {
  __m256 m;
};

struct F8 {
  static constexpr int64_t kLanes = 8;
  __m256 v;
  F8() = default;
  explicit F8(__m256 x) : v(x) {}
  explicit F8(float s) : v(_mm256_set1_ps(s)) {}

  // The interface kernels written over a lane type V use (vec16.h's Z16 has the same):
  // load f32, widen T for use as an operand of + - * only (see x86::load8_operand), round
  // into T once.
  static F8 load(const float* p) { return F8(_mm256_loadu_ps(p)); }
  template <class T>
  static F8 operand(const T* p) {
    return F8(x86::load8_operand(p));
  }
  template <class T>
  static void store(T* p, F8 a) {
    x86::store8(p, a.v);
  }
};

inline F8 operator+(F8 a, F8 b) { return F8(_mm256_add_ps(a.v, b.v)); }
inline F8 operator-(F8 a, F8 b) { return F8(_mm256_sub_ps(a.v, b.v)); }
inline F8 operator*(F8 a, F8 b) { return F8(_mm256_mul_ps(a.v, b.v)); }
inline F8 operator/(F8 a, F8 b) { return F8(_mm256_div_ps(a.v, b.v)); }
inline F8 operator-(F8 a) { return F8(_mm256_xor_ps(a.v, _mm256_set1_ps(-0.0f))); }

// Ordered, non-signaling predicates: false when either lane is NaN, as C++'s <, <=, >, >=;
// != is unordered: true for NaN, as C++'s.
inline M8 operator<(F8 a, F8 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)}; }
inline M8 operator<=(F8 a, F8 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ)}; }
inline M8 operator>(F8 a, F8 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ)}; }
inline M8 operator>=(F8 a, F8 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_GE_OQ)}; }
inline M8 operator!=(F8 a, F8 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_NEQ_UQ)}; }
inline M8 operator&&(M8 a, M8 b) { return {_mm256_and_ps(a.m, b.m)}; }

inline int count(M8 m) { return __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(m.m))); }
inline F8 select(M8 m, F8 a, F8 b) { return F8(_mm256_blendv_ps(b.v, a.v, m.m)); }
inline F8 fabs_of(F8 a) { return F8(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)); }
inline F8 sqrt_of(F8 a) { return F8(_mm256_sqrt_ps(a.v)); }  // correctly rounded, as std::sqrt

// For the transcendental functions: the scalar libm call per lane, so the bits are the
// scalar path's; only the conversions around it are vectorised.
template <class F>
inline F8 lanes(F8 a, F&& f) {
  alignas(32) float x[8];
  _mm256_store_ps(x, a.v);
  for (float& e : x) e = static_cast<float>(f(e));
  return F8(_mm256_load_ps(x));
}
template <class F>
inline F8 lanes(F8 a, F8 b, F&& f) {
  alignas(32) float x[8], y[8];
  _mm256_store_ps(x, a.v);
  _mm256_store_ps(y, b.v);
  for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(f(x[i], y[i]));
  return F8(_mm256_load_ps(x));
}

template <class T>
inline F8 load8(const T* p) {
  return F8(x86::load8(p));
}
// For a value used only as an operand of +, -, * (the op quiets a NaN itself): see
// x86::load8_operand. Both as F8's members.
template <class T>
inline F8 load8_operand(const T* p) { return F8::operand(p); }
template <class T>
inline void store8(T* p, F8 a) { F8::store(p, a); }

#endif

}  // namespace hg::cpu::vec
