// Contiguous-row steps shared by softmax/log_softmax and cross-entropy on the CPU: max,
// exp(x - m) with its sum, and the rounded outputs, eight f32 lanes at a time for
// f32/f16/bf16. Each element gets the scalar code's operations in its order (exp is libm's
// per element, sums run left to right), so results are bitwise the scalar loops'.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "framework/dtype.h"
#include "ops/cpu/vec/map8.h"

namespace hg::cpu::rows {

// max over x[0, n) as `v > m ? v : m` from -inf: NaN never wins; -inf for an empty row.
template <class T, class A = accum_t<T>>
A max(const T* x, int64_t n) {
  const auto scalar = [&](int64_t i0, A m) {
    for (int64_t i = i0; i < n; ++i) {
      const A v = load(x[i]);
      m = v > m ? v : m;
    }
    return m;
  };
  constexpr A kLow = -std::numeric_limits<A>::infinity();
#ifdef HG_VEC8
  if constexpr (vec::kVec8<T>) {
    if (n >= 8) {
      vec::F8 m8(kLow);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const vec::F8 v = vec::load8(x + i);
        m8 = vec::select(v > m8, v, m8);
      }
      // The lanes may meet +0 and -0 in another order than one walk does, so a zero maximum
      // can differ in sign; no result sees it: with both zeros present the sum of exps is
      // >= 2, log(sum) > 0, and exp(+-0) = 1, +-0 - log(sum) are equal.
      alignas(32) float lane[8];
      _mm256_store_ps(lane, m8.v);
      A m = scalar(i, kLow);
      for (float v : lane) m = v > m ? v : m;
      return m;
    }
  }
#endif
  return scalar(0, kLow);
}

// d[i] = x[i] - m (in A), vectorised where T allows.
template <class T, class A>
void shifted(const T* x, int64_t n, A m, A* d) {
  int64_t i = 0;
#ifdef HG_VEC8
  if constexpr (vec::kVec8<T>) {
    const vec::F8 m8(m);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, (vec::load8(x + i) - m8).v);
  }
#endif
  for (; i < n; ++i) d[i] = A(load(x[i])) - m;
}

// e[i] = exp(x[i] - m) and their sum, added left to right.
template <class T, class A>
A exp_sum(const T* x, int64_t n, A m, A* e) {
  shifted(x, n, m, e);
  A sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    e[i] = std::exp(e[i]);
    sum += e[i];
  }
  return sum;
}

// y[i] = round(f(v[i]...)) for an elementwise f written for A and for F8 alike (one body),
// over rows v... of A.
template <class T, class A, class F, class... V>
void store_map(int64_t n, T* y, F&& f, const A* a, const V*... v) {
  int64_t i = 0;
#ifdef HG_VEC8
  if constexpr (vec::kVec8<T>)
    for (; i + 8 <= n; i += 8)
      vec::store8(y + i, f(vec::F8(_mm256_loadu_ps(a + i)), vec::F8(_mm256_loadu_ps(v + i))...));
#endif
  for (; i < n; ++i) y[i] = store<T>(f(a[i], v[i]...));
}

// The sum of v[0, n) left to right.
template <class A>
A sum(const A* v, int64_t n) {
  A s = 0;
  for (int64_t i = 0; i < n; ++i) s += v[i];
  return s;
}

}  // namespace hg::cpu::rows
