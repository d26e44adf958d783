// Row conversions between a storage type T and the type A a kernel computes in: f16/bf16
// through the vector conversions of framework/half_convert.h (exact, NaNs as the scalar
// code), other pairs element by element. Kernels widen a row, work in A, narrow once.
#pragma once
#include <cstdint>
#include <type_traits>
#include <vector>

#include "framework/dtype.h"
#include "framework/half_convert.h"

namespace hg::cpu::vec {

template <class T, class A>
void widen(const T* src, A* dst, int64_t n) {
  if constexpr (std::is_same_v<T, half> && std::is_same_v<A, float>)
    convert_f16_to_f32(src, dst, static_cast<size_t>(n));
  else if constexpr (std::is_same_v<T, bfloat16> && std::is_same_v<A, float>)
    convert_bf16_to_f32(src, dst, static_cast<size_t>(n));
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<A>(load(src[i]));
}

template <class T, class A>
void narrow(const A* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, half> && std::is_same_v<A, float>)
    convert_f32_to_f16(src, dst, static_cast<size_t>(n));
  else if constexpr (std::is_same_v<T, bfloat16> && std::is_same_v<A, float>)
    convert_f32_to_bf16(src, dst, static_cast<size_t>(n));
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = store<T>(src[i]);
}

// src as A: src itself when T is A (writable when src is), else widened into buf; after
// changing a widened copy, write_back rounds it into src once.
template <class A, class T>
auto as_compute(T* src, int64_t n, std::vector<A>& buf) {
  using U = std::remove_const_t<T>;
  using R = std::conditional_t<std::is_const_v<T>, const A*, A*>;
  if constexpr (std::is_same_v<U, A>) {
    return R(src);
  } else {
    buf.resize(static_cast<size_t>(n));
    widen(static_cast<const U*>(src), buf.data(), n);
    return R(buf.data());
  }
}
template <class A, class T>
void write_back(const A* v, T* dst, int64_t n) {
  if constexpr (!std::is_same_v<T, A>) narrow(v, dst, n);
}

// Where a row of A results goes: straight into dst when T is A, else into buf, which
// finish() rounds once into dst.
template <class T, class A>
class RowOut {
 public:
  A* target(T* dst, int64_t n) {
    if constexpr (std::is_same_v<T, A>) {
      return dst;
    } else {
      buf_.resize(static_cast<size_t>(n));
      return buf_.data();
    }
  }
  void finish(T* dst, int64_t n) {
    if constexpr (!std::is_same_v<T, A>) narrow(buf_.data(), dst, n);
  }

 private:
  std::vector<A> buf_;
};

}  // namespace hg::cpu::vec
