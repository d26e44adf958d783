// The entry points of GCC's ThreadSanitizer instrumentation, which the emulation's kernel
// units are compiled with (cuda/meson.build) but never linked against libtsan: here every
// load, store and atomic of kernel code reaches the emulator's checks (emu::memory_access)
// with the address of the instruction, and atomics are done as real host atomics. In an
// AddressSanitizer build, whose instrumentation the kernel units cannot also carry, each
// access is checked against ASan's shadow here and reported as ASan would.
#include <cstddef>
#include <cstdint>

#include "cuda/emu/executor.h"
#include "cuda/emu/racecheck.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace {

inline void check_access(void* p, size_t n, hg::cuda::emu::Access kind, void* pc) {
#if defined(__SANITIZE_ADDRESS__)
  if (__asan_region_is_poisoned(p, n))
    __asan_report_error(pc, __builtin_frame_address(0), __builtin_frame_address(0), p,
                        kind != hg::cuda::emu::Access::read && kind != hg::cuda::emu::Access::atomic_read, n);
#endif
  hg::cuda::emu::memory_access(p, n, kind, pc);
}

}  // namespace

using hg::cuda::emu::Access;

#define HG_PC __builtin_return_address(0)
#define HG_PLAIN(n)                                                                                  \
  void __tsan_read##n(void* p) { check_access(p, n, Access::read, HG_PC); }                         \
  void __tsan_write##n(void* p) { check_access(p, n, Access::write, HG_PC); }                       \
  void __tsan_unaligned_read##n(void* p) { check_access(p, n, Access::read, HG_PC); }               \
  void __tsan_unaligned_write##n(void* p) { check_access(p, n, Access::write, HG_PC); }             \
  void __tsan_volatile_read##n(void* p) { check_access(p, n, Access::read, HG_PC); }                \
  void __tsan_volatile_write##n(void* p) { check_access(p, n, Access::write, HG_PC); }

// The memory-order argument is ignored: every atomic is sequentially consistent here.
#define HG_ATOMICS(bits, T)                                                                          \
  T __tsan_atomic##bits##_load(const volatile T* a, int) {                                           \
    check_access(const_cast<T*>(a), sizeof(T), Access::atomic_read, HG_PC);                         \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                     \
  }                                                                                                  \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                        \
    check_access(const_cast<T*>(a), sizeof(T), Access::atomic, HG_PC);                              \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                  \
  HG_RMW(bits, T, exchange, exchange_n)                                                                          \
  HG_RMW(bits, T, fetch_add, fetch_add)                                                                         \
  HG_RMW(bits, T, fetch_sub, fetch_sub)                                                                         \
  HG_RMW(bits, T, fetch_and, fetch_and)                                                                         \
  HG_RMW(bits, T, fetch_or, fetch_or)                                                                          \
  HG_RMW(bits, T, fetch_xor, fetch_xor)                                                                         \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* expected, T v, int, int) {     \
    check_access(const_cast<T*>(a), sizeof(T), Access::atomic, HG_PC);                              \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);   \
  }                                                                                                  \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* expected, T v, int, int) {       \
    check_access(const_cast<T*>(a), sizeof(T), Access::atomic, HG_PC);                              \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);   \
  }                                                                                                  \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T expected, T v, int, int) {           \
    check_access(const_cast<T*>(a), sizeof(T), Access::atomic, HG_PC);                              \
    __atomic_compare_exchange_n(a, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
    return expected;                                                                                 \
  }
#define HG_RMW(bits, T, op, builtin)                                                                          \
  T __tsan_atomic##bits##_##op(volatile T* a, T v, int) {                                            \
    check_access(const_cast<T*>(a), sizeof(T), Access::atomic, HG_PC);                              \
    return __atomic_##builtin(a, v, __ATOMIC_SEQ_CST);                                                  \
  }

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
void __tsan_read_range(void* p, size_t n) { check_access(p, n, Access::read, HG_PC); }
void __tsan_write_range(void* p, size_t n) { check_access(p, n, Access::write, HG_PC); }
HG_PLAIN(1)
HG_PLAIN(2)
HG_PLAIN(4)
HG_PLAIN(8)
HG_PLAIN(16)
HG_ATOMICS(8, uint8_t)
HG_ATOMICS(16, uint16_t)
HG_ATOMICS(32, uint32_t)
HG_ATOMICS(64, uint64_t)
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}
