// The AMX micro-kernels on the real tile unit: amx::tile_kernel instantiated with the
// AMX-TILE/AMX-BF16 instructions, compiled in a target region (the library stays
// x86-64-v3) and run only when isa() == amx, i.e. after the OS granted tile data.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "framework/error.h"
#include "framework/half.h"
#include "ops/cpu/gemm/kernel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HG_GEMM_AMX 1
#endif

#ifdef HG_GEMM_AMX
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16")
// amx.h's own functions (its includes are all above) compile for AMX here, so the tile
// instructions inline into the kernel loop. Its inline functions emit no AVX-512 code (AMX
// target flags do not enable it), so a copy the linker keeps runs on any x86-64-v3 CPU.
#include "ops/cpu/gemm/amx.h"

namespace hg::cpu::gemm {
namespace {

// GCC's tile intrinsics paste the tile number into the instruction text, so each must be a
// literal: HG_TILE(t, op) expands op(n) for the literal n equal to the constant t.
#define HG_TILE(t, op)              \
  if constexpr ((t) == 0) op(0);     \
  else if constexpr ((t) == 1) op(1); \
  else if constexpr ((t) == 2) op(2); \
  else if constexpr ((t) == 3) op(3); \
  else if constexpr ((t) == 4) op(4); \
  else if constexpr ((t) == 5) op(5); \
  else if constexpr ((t) == 6) op(6); \
  else op(7)

struct HardwareTiles {
  // LDTILECFG once per thread: the configuration stays loaded until this thread releases it.
  static void configure_once(const amx::TileConfig& c) {
    thread_local bool configured = false;
    if (configured) return;
    _tile_loadconfig(&c);
    configured = true;
  }
  template <int T>
  static void zero() {
#define HG_ZERO(n) _tile_zero(n)
    HG_TILE(T, HG_ZERO);
#undef HG_ZERO
  }
  template <int T>
  static void load(const void* p, int64_t stride) {
#define HG_LOAD(n) _tile_loadd(n, p, stride)
    HG_TILE(T, HG_LOAD);
#undef HG_LOAD
  }
  template <int T>
  static void store(void* p, int64_t stride) {
#define HG_STORE(n) _tile_stored(n, p, stride)
    HG_TILE(T, HG_STORE);
#undef HG_STORE
  }
  // The four products tile_kernel issues: C tile 2g + h += A tile 4 + g times B tile 6 + h.
  template <int C, int A, int B>
  static void dot() {
    static_assert(A == 4 + C / 2 && B == 6 + C % 2, "tile_kernel's tile assignment");
    if constexpr (C == 0) _tile_dpbf16ps(0, 4, 6);
    else if constexpr (C == 1) _tile_dpbf16ps(1, 4, 7);
    else if constexpr (C == 2) _tile_dpbf16ps(2, 5, 6);
    else _tile_dpbf16ps(3, 5, 7);
  }
};

#undef HG_TILE

void bf16_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  amx::tile_kernel<HardwareTiles, 1>(kc, a, b, c, ldc, first, half);
}

void f16_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  amx::tile_kernel<HardwareTiles, 2>(kc, a, b, c, ldc, first, half);
}

}  // namespace
}  // namespace hg::cpu::gemm

#pragma GCC pop_options
#else
#include "ops/cpu/gemm/amx.h"
#endif

namespace hg::cpu::gemm {

const Kernel<float>& amx_bf16_kernel() {
#ifdef HG_GEMM_AMX
  static const Kernel<float> k{"amx bf16 32x32", amx::MR, amx::NR, bf16_fn, amx::panel_bytes<1>, amx::repack_a<1>,
                               amx::repack_b<1>, 1};
#else
  static const Kernel<float> k = avx2_kernel();
#endif
  return k;
}

const Kernel<float>& amx_f16_kernel() {
#ifdef HG_GEMM_AMX
  static const Kernel<float> k{"amx f16 (hi+lo bf16) 32x32", amx::MR, amx::NR, f16_fn, amx::panel_bytes<2>,
                               amx::repack_a<2>, amx::repack_b<2>, 4};
#else
  static const Kernel<float> k = avx2_kernel();
#endif
  return k;
}

}  // namespace hg::cpu::gemm
