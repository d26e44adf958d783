// The AMX kernels' portable parts: the exact f16 = hi + lo bf16 split, the conversion of
// the engine's f32 panels into AMX's tile layout (A rows of 32 bf16; B in VNNI k-pairs),
// and the 32x32 micro-kernel written against a tile interface `Tiles`, which is the real
// instructions on an AMX CPU (kernel_amx.cpp) or a scalar model of them (amx_model.h), so
// the layout, tile configuration and loop run and are tested on any machine.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "framework/half.h"

namespace hg::cpu::gemm::amx {

constexpr int64_t kRows = 16;        // rows per tile
constexpr int64_t kRowBytes = 64;    // bytes per tile row: 32 bf16 or 16 f32
constexpr int64_t kK = 32;           // k values per tile step (16 pairs)
constexpr int64_t kTileBytes = kRows * kRowBytes;
constexpr int64_t MR = 32, NR = 32;  // the register tile: 2 x 2 accumulator tiles of 16 x 16 f32

// The tile configuration LDTILECFG reads (palette 1): every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

inline TileConfig full_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.colsb[t] = kRowBytes, c.rows[t] = kRows;
  return c;
}

inline uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
inline float from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// The bf16 nearest a finite f32 (ties to even).
inline uint16_t bf16_rne(float x) {
  const uint32_t u = bits(x);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Whether a value is one AMX multiplies exactly as the f32 chain would: finite, and zero
// or at least 2^-56 in magnitude. Products of two such bf16 values are multiples of 2^-126,
// so no product or partial sum is an f32 subnormal, which AMX would flush to zero.
inline bool amx_safe(float x) { return x == 0.0f || (std::isfinite(x) && std::fabs(x) >= 0x1p-56f); }

// One operand value in `Planes` bf16 planes: plane 0 alone for a bf16 value; hi + lo for
// an f16 value (hi = bf16(x), lo = x - hi, both exact). `ok` turns false when x is not of
// that format or not amx_safe.
template <int Planes>
inline void split(float x, uint16_t out[Planes], bool& ok) {
  if (!amx_safe(x)) {
    ok = false;
    out[0] = 0;
    if constexpr (Planes == 2) out[1] = 0;
    return;
  }
  if constexpr (Planes == 1) {
    ok &= (bits(x) & 0xFFFFu) == 0;
    out[0] = static_cast<uint16_t>(bits(x) >> 16);
  } else {
    const uint16_t hi = bf16_rne(x);
    const float lo = x - from_bf16(hi);  // exact: both are multiples of x's f16 ulp
    // For an f16 x (11 significant bits) lo has at most 3 and is a multiple of 2^-24, so it
    // is an exact, normal bf16 (tests/ops/cpu/gemm/test_amx.cpp checks all 65,536 values).
    ok &= static_cast<float>(half(x)) == x;
    out[0] = hi;
    out[1] = static_cast<uint16_t>(bits(lo) >> 16);
  }
}

// Bytes of one converted panel: k rounded up to 32, `Planes` planes of bf16.
template <int Planes>
int64_t panel_bytes(int64_t kc, int64_t r) {
  return (kc + kK - 1) / kK * kK * r * 2 * Planes;
}

// A panel (32 rows of kc, row-major) into tiles [k step][plane][row group]: 16 rows x 32
// bf16, k past kc zero.
template <int Planes>
bool repack_a(const float* panel, int64_t kc, void* dst) {
  auto* d = static_cast<uint16_t*>(dst);
  bool ok = true;
  for (int64_t k0 = 0; k0 < kc; k0 += kK)
    for (int64_t g = 0; g < MR / kRows; ++g)
      for (int64_t r = 0; r < kRows; ++r)
        for (int64_t k = 0; k < kK; ++k) {
          uint16_t v[Planes] = {};
          if (k0 + k < kc) split<Planes>(panel[(g * kRows + r) * kc + k0 + k], v, ok);
          for (int p = 0; p < Planes; ++p) d[(((k0 / kK) * Planes + p) * 2 + g) * kRows * kK + r * kK + k] = v[p];
        }
  return ok;
}

// B panel (kc groups of 32 columns) into VNNI tiles [k step][plane][column group]: row q
// holds k pair (2q, 2q + 1) of 16 columns, element (q, n, e) = B(k0 + 2q + e, n).
template <int Planes>
bool repack_b(const float* panel, int64_t kc, void* dst) {
  auto* d = static_cast<uint16_t*>(dst);
  bool ok = true;
  for (int64_t k0 = 0; k0 < kc; k0 += kK)
    for (int64_t g = 0; g < NR / 16; ++g)
      for (int64_t q = 0; q < kK / 2; ++q)
        for (int64_t n = 0; n < 16; ++n)
          for (int64_t e = 0; e < 2; ++e) {
            const int64_t k = k0 + 2 * q + e;
            uint16_t v[Planes] = {};
            if (k < kc) split<Planes>(panel[k * NR + g * 16 + n], v, ok);
            for (int p = 0; p < Planes; ++p)
              d[(((k0 / kK) * Planes + p) * 2 + g) * kRows * kK + q * kK + n * 2 + e] = v[p];
          }
  return ok;
}

// The tile unit is configured (LDTILECFG, every tile 16 rows of 64 bytes) at the start of
// each engine task and released (TILERELEASE) at its end: the kernel's `begin` and `end`.
// Configuring once per thread for good would break when other code on the thread (another
// library's AMX kernels, a TILERELEASE) changes the configuration between two products.
// The configuration lives in static storage: GCC 12 does not treat LDTILECFG's operand as
// read, so the stores filling a stack copy were dropped and the instruction faulted on what
// the stack held (found the first time the kernel ran on real tiles).
template <class Tiles>
void begin() {
  static const TileConfig config = full_config();
  Tiles::configure(config);
}
template <class Tiles>
void end() {
  Tiles::release();
}

// The micro-kernel: accumulator tiles 0-3 (C rows g, columns h at tile 2g + h), A tiles 4
// and 5 (row groups), B tiles 6 and 7 (column groups). For an f16 split the four plane
// products run as hi·hi, hi·lo, lo·lo, lo·hi so each step reloads only one operand pair.
// The tile configuration is the one `begin` loaded.
template <class Tiles, int Planes>
void tile_kernel(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  const int64_t cs = ldc * 4;
  float* c1 = c + kRows * ldc;
  if (first) {
    Tiles::template zero<0>(), Tiles::template zero<2>();
    if (!half) Tiles::template zero<1>(), Tiles::template zero<3>();
  } else {
    Tiles::template load<0>(c, cs), Tiles::template load<2>(c1, cs);
    if (!half) Tiles::template load<1>(c + 16, cs), Tiles::template load<3>(c1 + 16, cs);
  }
  constexpr int kSteps = Planes == 1 ? 1 : 4;
  constexpr int kPlaneA[4] = {0, 0, 1, 1}, kPlaneB[4] = {0, 1, 1, 0};
  for (int64_t k0 = 0; k0 < kc; k0 += kK) {
    const int64_t step = (k0 / kK) * Planes;
    for (int s = 0; s < kSteps; ++s) {
      if (s == 0 || kPlaneA[s] != kPlaneA[s - 1]) {
        const unsigned char* t = pa + (step + kPlaneA[s]) * 2 * kTileBytes;
        Tiles::template load<4>(t, kRowBytes), Tiles::template load<5>(t + kTileBytes, kRowBytes);
      }
      if (s == 0 || kPlaneB[s] != kPlaneB[s - 1]) {
        const unsigned char* t = pb + (step + kPlaneB[s]) * 2 * kTileBytes;
        Tiles::template load<6>(t, kRowBytes);
        if (!half) Tiles::template load<7>(t + kTileBytes, kRowBytes);
      }
      Tiles::template dot<0, 4, 6>(), Tiles::template dot<2, 5, 6>();
      if (!half) Tiles::template dot<1, 4, 7>(), Tiles::template dot<3, 5, 7>();
    }
  }
  Tiles::template store<0>(c, cs), Tiles::template store<2>(c1, cs);
  if (!half) Tiles::template store<1>(c + 16, cs), Tiles::template store<3>(c1 + 16, cs);
}

}  // namespace hg::cpu::gemm::amx
