// Atomic read-modify-write on global or shared memory (atom.add, atom.max, atom.cas,
// atom.exch); each returns the old value. Under the emulation blocks run on several host
// threads at once, so these are real host atomics (std::atomic_ref), not plain updates.
#pragma once
#include <atomic>
#include <type_traits>

#include "cuda/primitives/common.h"

namespace hg::cuda {

#if defined(HG_CUDA_EMULATION)
#define HG_ATOMIC(name, T, expr)                              \
  HG_DEVICE T name(T* address, T value) {                     \
    std::atomic_ref<T> a(*address);                           \
    return expr;                                              \
  }
HG_ATOMIC(atomic_add, float, a.fetch_add(value))
HG_ATOMIC(atomic_add, int32_t, a.fetch_add(value))
HG_ATOMIC(atomic_add, uint32_t, a.fetch_add(value))
HG_ATOMIC(atomic_add, unsigned long long, a.fetch_add(value))
HG_ATOMIC(atomic_exch, uint32_t, a.exchange(value))
#undef HG_ATOMIC

template <class T>
HG_DEVICE T atomic_max(T* address, T value) {
  static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>, "atomic_max: int32_t or uint32_t");
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (old < value && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

template <class T>
HG_DEVICE T atomic_cas(T* address, T compare, T value) {
  static_assert(std::is_same_v<T, uint32_t> || std::is_same_v<T, unsigned long long>,
                "atomic_cas: uint32_t or unsigned long long");
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;
}
#else
HG_DEVICE float atomic_add(float* address, float value) { return atomicAdd(address, value); }
HG_DEVICE int32_t atomic_add(int32_t* address, int32_t value) { return atomicAdd(address, value); }
HG_DEVICE uint32_t atomic_add(uint32_t* address, uint32_t value) { return atomicAdd(address, value); }
HG_DEVICE unsigned long long atomic_add(unsigned long long* address, unsigned long long value) {
  return atomicAdd(address, value);
}
HG_DEVICE uint32_t atomic_exch(uint32_t* address, uint32_t value) { return atomicExch(address, value); }
template <class T>
HG_DEVICE T atomic_max(T* address, T value) {
  static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>, "atomic_max: int32_t or uint32_t");
  return atomicMax(address, value);
}
template <class T>
HG_DEVICE T atomic_cas(T* address, T compare, T value) {
  static_assert(std::is_same_v<T, uint32_t> || std::is_same_v<T, unsigned long long>,
                "atomic_cas: uint32_t or unsigned long long");
  return atomicCAS(address, compare, value);
}
#endif

}  // namespace hg::cuda
