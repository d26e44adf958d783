// The `Tiles` interface of amx.h on the real tile unit (AMX-TILE, AMX-BF16 instructions).
// Include only inside a `#pragma GCC target("amx-tile,amx-bf16")` region of a file that runs
// it only when isa() == amx (kernel_amx.cpp, conv2d_amx.cpp): the library stays x86-64-v3.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/gemm/amx.h"

namespace hg::cpu::gemm::amx {

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
  static void configure(const TileConfig& c) { _tile_loadconfig(&c); }
  static void release() { _tile_release(); }
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
  // C += A · B: accumulators are tiles 0-3, A operands 4-5, B operands 6-7 (the kernels'
  // fixed assignment).
  template <int C, int A, int B>
  static void dot() {
    static_assert(C >= 0 && C < 4 && (A == 4 || A == 5) && (B == 6 || B == 7), "tile assignment");
// One literal instruction per (C, A, B): HG_DOT(c) picks A and B for accumulator c.
#define HG_DOT(c)                                                     \
  do {                                                                \
    if constexpr (A == 4 && B == 6) _tile_dpbf16ps(c, 4, 6);          \
    else if constexpr (A == 4 && B == 7) _tile_dpbf16ps(c, 4, 7);     \
    else if constexpr (A == 5 && B == 6) _tile_dpbf16ps(c, 5, 6);     \
    else _tile_dpbf16ps(c, 5, 7);                                     \
  } while (0)
    HG_TILE(C, HG_DOT);
#undef HG_DOT
  }
};

#undef HG_TILE

}  // namespace hg::cpu::gemm::amx
