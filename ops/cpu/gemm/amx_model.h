// A scalar model of the AMX tile unit (8 tiles of 16 rows x 64 bytes, LDTILECFG,
// TILELOADD/TILESTORED/TILEZERO, TDPBF16PS with its DAZ inputs, FTZ outputs and
// round-to-nearest-even f32 sums), the `Tiles` interface amx::tile_kernel is written
// against, so the AMX kernel runs, as the SDM's pseudocode specifies, on CPUs without AMX
// (tests). The real unit is not bitwise this model: measured on a Xeon (2026-12-06), one k
// pair gives acc + round(p0 + p1) (the pseudocode: round(round(acc + p0) + p1)), and the
// pairs of one instruction are summed in an order none of the simple models reproduces;
// both stay within the f32-accumulation bound the tests check against f64.
#pragma once
#include <cmath>
#include <cstring>

#include "framework/error.h"
#include "ops/cpu/gemm/amx.h"

namespace hg::cpu::gemm::amx {

struct ModelTiles {
  struct State {
    TileConfig cfg;
    bool configured = false;
    int configures = 0;  // how many LDTILECFG this thread ran
    unsigned char t[8][kTileBytes] = {};
  };
  static State& state() {
    thread_local State s;
    return s;
  }

  static void configure(const TileConfig& c) {
    State& s = state();
    s.cfg = c, s.configured = true, ++s.configures;
  }
  // TILERELEASE: the tiles return to their initial, unconfigured state.
  static void release() {
    State& s = state();
    s.configured = false;
    std::memset(s.t, 0, sizeof s.t);
  }

  // Rows and bytes per row of tile t as configured; using an unconfigured tile faults on
  // the hardware, an hg::Error here.
  static void shape(int t, int64_t& rows, int64_t& colsb) {
    const State& s = state();
    HG_CHECK(s.configured, "AMX model: tile ", t, " used before LDTILECFG");
    rows = s.cfg.rows[t], colsb = s.cfg.colsb[t];
    HG_CHECK(rows > 0 && rows <= kRows && colsb > 0 && colsb <= kRowBytes, "AMX model: tile ", t,
             " configured as ", rows, " rows of ", colsb, " bytes");
  }

  template <int T>
  static void zero() {
    int64_t rows, colsb;
    shape(T, rows, colsb);
    std::memset(state().t[T], 0, kTileBytes);
  }

  template <int T>
  static void load(const void* p, int64_t stride) {
    int64_t rows, colsb;
    shape(T, rows, colsb);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(state().t[T] + r * kRowBytes, static_cast<const unsigned char*>(p) + r * stride,
                  static_cast<size_t>(colsb));
  }

  template <int T>
  static void store(void* p, int64_t stride) {
    int64_t rows, colsb;
    shape(T, rows, colsb);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<unsigned char*>(p) + r * stride, state().t[T] + r * kRowBytes,
                  static_cast<size_t>(colsb));
  }

  // TDPBF16PS c, a, b: c[m][n] += a[m][2q] b[q][n][0], then += a[m][2q+1] b[q][n][1], for
  // each pair q in order; bf16 subnormal inputs read as zero, f32 subnormal results flush,
  // and (conservatively: the manual is not explicit) so does a subnormal accumulator.
  template <int C, int A, int B>
  static void dot() {
    int64_t mc, nc, ma, ka, kb, nb;
    shape(C, mc, nc), shape(A, ma, ka), shape(B, kb, nb);
    HG_CHECK(mc == ma && ka / 4 == kb && nc == nb, "AMX model: TDPBF16PS tile shapes do not match");
    State& s = state();
    auto bf = [](const unsigned char* p) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7F80u) == 0 ? std::copysign(0.0f, from_bf16(h)) : from_bf16(h);
    };
    auto ftz = [](float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; };
    for (int64_t m = 0; m < mc; ++m)
      for (int64_t n = 0; n < nc / 4; ++n) {
        float acc;
        std::memcpy(&acc, s.t[C] + m * kRowBytes + n * 4, 4);
        acc = ftz(acc);
        for (int64_t q = 0; q < kb; ++q)
          for (int64_t e = 0; e < 2; ++e) {
            const float x = bf(s.t[A] + m * kRowBytes + (2 * q + e) * 2), y = bf(s.t[B] + q * kRowBytes + n * 4 + e * 2);
            acc = ftz(acc + x * y);
          }
        std::memcpy(s.t[C] + m * kRowBytes + n * 4, &acc, 4);
      }
  }
};

}  // namespace hg::cpu::gemm::amx
