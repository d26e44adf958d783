// The vector elementwise loop: out[i] = f(a[i], b[i], ...) over f32/f16/bf16 data eight
// lanes at a time (load -> f32, compute, round once on store), each input contiguous or
// a broadcast scalar. The tail runs through the same lanes via a padded block, so every
// element of the output comes from the one vector body.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "framework/dtype.h"
#include "ops/cpu/vec/vec8.h"

namespace hg::cpu::vec {

// Whether T's contiguous loops run on F8 in this build.
template <class T>
inline constexpr bool kVec8 =
#ifdef HG_VEC8
    std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
#else
    false;
#endif

#ifdef HG_VEC8

// One input of the loop: `p` contiguous, or (p's stride 0) the same value in every lane.
template <class T>
struct In8 {
  const T* p;
  bool broadcast;
  F8 value;  // the broadcast value, widened once
  F8 at(int64_t i) const { return broadcast ? value : load8(p + i); }
  // The elements [i, n) (n - i < 8) copied to the front of a zeroed block.
  In8 tail(int64_t i, int64_t n, T* block) const {
    if (broadcast) return *this;
    std::copy(p + i, p + n, block);
    return {block, false, value};
  }
};

template <class T>
In8<T> in8(const char* p, int64_t stride_bytes) {
  const T* t = reinterpret_cast<const T*>(p);
  return {t, stride_bytes == 0, stride_bytes == 0 ? F8(load(*t)) : F8(0.0f)};
}

// The last n - i < 8 elements, each input copied into its own zeroed block.
template <class T, class F, size_t... K, class... Ins>
inline void run8_tail(int64_t i, int64_t n, T* out, F&& f, std::index_sequence<K...>, const Ins&... in) {
  T blocks[sizeof...(Ins) + 1][8] = {};
  store8(blocks[0], f(in.tail(i, n, blocks[K + 1]).at(0)...));
  std::copy(blocks[0], blocks[0] + (n - i), out + i);
}

template <class T, class F, class... Ins>
inline void run8(int64_t n, T* out, F&& f, const Ins&... in) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(out + i, f(in.at(i)...));
  if (i < n) run8_tail(i, n, out, f, std::index_sequence_for<Ins...>{}, in...);
}

#endif

// Whether an inner loop of `n` elements with these byte strides can take run8: the
// output contiguous, every input contiguous or broadcast.
template <class T, class... S>
inline bool vec8_strides(int64_t out_stride, S... in_strides) {
  constexpr auto es = static_cast<int64_t>(sizeof(T));
  return kVec8<T> && out_stride == es && ((in_strides == es || in_strides == 0) && ...);
}

}  // namespace hg::cpu::vec
