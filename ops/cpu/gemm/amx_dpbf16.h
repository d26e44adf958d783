// The `Tiles` interface of amx.h on AVX512_BF16 (vdpbf16ps), for CPUs that have that
// instruction and no AMX (AMD Zen 4/5): the tile kernels written for AMX (the direct
// convolution, conv2d_amx.h) run their bf16 products on it. One tile product C += A·B is
// 16 x 16 vdpbf16ps: row m of C in one zmm, and for each k pair q, A's pair (m, q)
// broadcast against B's row q (16 columns of a pair: AMX's VNNI layout is the instruction's).
// Like AMX it reads bf16 subnormals as zero and flushes subnormal sums, so the kernels'
// refusal of operands below 2^-56 (amx::amx_safe) covers it as well; it adds each pair's two
// exact products into the sum in its own order, within the f32-accumulation bound.
//
// The accumulator tiles (0-3) live in a per-thread buffer between products; an operand
// tile's load (4-7) only records where its rows are, which the kernels allow: they never
// write an operand's memory between its load and the products that read it. Only `dot`
// uses AVX-512 instructions (a function of its own with the target attribute: call it on a
// CPU that has AVX512_BF16 only), so this header compiles in any translation unit.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops/cpu/gemm/amx.h"

namespace hg::cpu::gemm::amx {

struct DotTiles {
  struct State {  // trivially constructible: a thread_local without a guard
    alignas(64) float acc[4][kRows * 16];
    const unsigned char* src[8];
    int64_t stride[8];
    int skip;  // 16 - the pairs products read (limit_pairs), zero-initialized: all 16
  };
  static State& state() {
    thread_local State s;
    return s;
  }

  static void configure(const TileConfig&) {}
  static void release() {}

  template <int T>
  static void zero() {
    static_assert(T >= 0 && T < 4, "accumulator tiles are 0-3");
    std::memset(state().acc[T], 0, sizeof(State::acc[0]));
  }
  template <int T>
  static void load(const void* p, int64_t stride) {
    if constexpr (T < 4) {
      float* d = state().acc[T];
      for (int64_t r = 0; r < kRows; ++r)
        std::memcpy(d + r * 16, static_cast<const unsigned char*>(p) + r * stride, kRowBytes);
    } else {
      state().src[T] = static_cast<const unsigned char*>(p), state().stride[T] = stride;
    }
  }
  template <int T>
  static void store(void* p, int64_t stride) {
    static_assert(T >= 0 && T < 4, "accumulator tiles are 0-3");
    const float* s = state().acc[T];
    for (int64_t r = 0; r < kRows; ++r) std::memcpy(static_cast<unsigned char*>(p) + r * stride, s + r * 16, kRowBytes);
  }
  // Until the next call, products read only the first `pairs` (1-16) k pairs of their A and
  // B tiles (rounded up to a multiple of 4): the kernel declares the rest zero (a partial k
  // step's padding), which the hardware would multiply.
  static void limit_pairs(int pairs) { state().skip = 16 - (pairs + 3) / 4 * 4; }
  template <int C, int A, int B>
  static void dot() {
    static_assert(C >= 0 && C < 4 && (A == 4 || A == 5) && (B == 6 || B == 7), "tile assignment");
    State& s = state();
    switch (s.skip) {
      case 0: return product<16>(s.acc[C], s.src[A], s.stride[A], s.src[B], s.stride[B]);
      case 4: return product<12>(s.acc[C], s.src[A], s.stride[A], s.src[B], s.stride[B]);
      case 8: return product<8>(s.acc[C], s.src[A], s.stride[A], s.src[B], s.stride[B]);
      default: return product<4>(s.acc[C], s.src[A], s.stride[A], s.src[B], s.stride[B]);
    }
  }

  // c[m][n] += sum over q < Pairs of a[m][q] · b[q][n] (pairs of bf16), 16 independent sums per
  // step so the instruction's latency is covered. A's pair is the instruction's broadcast
  // memory operand (one instruction per pair; GCC 12 does not fold the broadcast itself),
  // its rows addressed from four bases with the row stride and three times it as index.
  template <int Pairs>
  __attribute__((target("avx512f,avx512bw,avx512bf16"), noinline)) static void product(
      float* c, const unsigned char* a, int64_t sa, const unsigned char* b, int64_t sb) {
    __m512 acc[kRows];
#pragma GCC unroll 16
    for (int m = 0; m < kRows; ++m) acc[m] = _mm512_load_ps(c + m * 16);
    const unsigned char* base[4] = {a, a + 4 * sa, a + 8 * sa, a + 12 * sa};
    const int64_t s3 = 3 * sa;
#pragma GCC unroll 16
    for (int q = 0; q < Pairs; ++q) {
      const __m512bh bq = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + q * sb));
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const unsigned char* r = base[g] + 4 * q;
        acc[4 * g] = dot_bcast(acc[4 * g], bq, r);
        acc[4 * g + 1] = dot_bcast(acc[4 * g + 1], bq, r + sa);
        acc[4 * g + 2] = dot_bcast(acc[4 * g + 2], bq, r + 2 * sa);
        acc[4 * g + 3] = dot_bcast(acc[4 * g + 3], bq, r + s3);
      }
    }
#pragma GCC unroll 16
    for (int m = 0; m < kRows; ++m) _mm512_store_ps(c + m * 16, acc[m]);
  }
  // The direct convolution's block (conv2d_amx.h, run) with its sums in registers: NP pixels
  // by FG groups of 16 filters, c[i * ldc + 16 f + j] = the sum over kernel rows r < R, steps
  // st < steps and pairs q of the step (of ceil(min(32, SC - 32 st) / 2)) of the image pair
  // a[i * sa + r * ra + 32 st + 2q] times the weights' pair row b[f * gb + (r * steps + st) *
  // 512 + 32 q + 2j] (the plan's B tiles). Each sum is the chain the tile products make
  // (pairs in order, step after step, from zero) without their loads and stores of the sums
  // between products: the same bits. The zero pairs a tile product would add past a partial
  // step's last are left out (adding a zero product to a sum started at +0 changes nothing).
  // Pixels from Brk on (Brk < NP: the block crosses an output row's end) start `gap` values
  // further: a + i * sa + gap (the padding columns between two rows, not computed).
  struct ConvRows {
    const uint16_t* a;  // the block's first pixel's value 0 of kernel row 0
    int64_t sa, ra;     // from a pixel to the next, from a kernel row to the next (values)
    int64_t R, steps, SC;
    const uint16_t* b;  // the first group's B tile of (r 0, step 0)
    int64_t gb;         // from a group's B tiles to the next (values)
    float* c;
    int64_t ldc;
    int64_t gap = 0;    // values skipped before pixel Brk
  };
  template <int NP, int FG, int Brk = NP>
  __attribute__((target("avx512f,avx512bw,avx512bf16"), noinline)) static void conv_rows(const ConvRows& k) {
    static_assert(Brk >= 1 && Brk <= NP);
    auto pixel = [&](const uint16_t* p, int i) { return p + i * k.sa + (i >= Brk ? k.gap : 0); };
    __m512 acc[NP][FG];
#pragma GCC unroll 24
    for (int i = 0; i < NP; ++i)
#pragma GCC unroll 4
      for (int f = 0; f < FG; ++f) acc[i][f] = _mm512_setzero_ps();
    for (int64_t r = 0; r < k.R; ++r)
      for (int64_t st = 0; st < k.steps; ++st) {
        const int64_t pairs = (std::min<int64_t>(kK, k.SC - st * kK) + 1) / 2;
        const uint16_t* a = k.a + r * k.ra + st * kK;
        const uint16_t* b = k.b + (r * k.steps + st) * kRows * kK;
        {  // The pixels' next step (or next kernel row) into L1 while this one runs: with
           // C = 512 a block's rows pass L1 (3x3 512->512 @8 forward 3.6 -> 3.5 ms, Zen 5).
           // A prefetch never faults, so the one past the last row needs no test.
          const uint16_t* an = st + 1 < k.steps ? a + kK : a + k.ra - st * kK;
#pragma GCC unroll 24
          for (int i = 0; i < NP; ++i) _mm_prefetch(reinterpret_cast<const char*>(pixel(an, i)), _MM_HINT_T0);
        }
        for (int64_t q = 0; q < pairs; ++q) {
          __m512bh bq[FG];
#pragma GCC unroll 4
          for (int f = 0; f < FG; ++f)
            bq[f] = reinterpret_cast<__m512bh>(_mm512_load_si512(b + f * k.gb + q * 32));
#pragma GCC unroll 24
          for (int i = 0; i < NP; ++i) {
            const unsigned char* p = reinterpret_cast<const unsigned char*>(pixel(a, i) + 2 * q);
#pragma GCC unroll 4
            for (int f = 0; f < FG; ++f) acc[i][f] = dot_bcast(acc[i][f], bq[f], p);
          }
        }
      }
#pragma GCC unroll 24
    for (int i = 0; i < NP; ++i)
#pragma GCC unroll 4
      for (int f = 0; f < FG; ++f) _mm512_storeu_ps(k.c + i * k.ldc + 16 * f, acc[i][f]);
  }

  // The weight gradient's block (conv2d_amx_wgrad.h) with its sums in registers: NF filters
  // by NV columns of 16 values, over n steps of 32 pixels (16 pairs each):
  // c[f * ldc + col_at[e] + j] (from zero when `first`, else from what is there) plus, step
  // t by step, pair q by pair, gyT's pair a[t * sa + 32 f + 2q] times the image pairs' row
  // b[16 t + q][off[e] + j] (each pair's row found on its own: a step may cross output rows).
  // The chain the tile products make, without their loads and stores of the sums between
  // products: the same bits.
  struct WgradRows {
    const uint16_t* a;
    int64_t sa;
    const uint32_t* const* b;
    const int64_t* off;
    int64_t n;
    float* c;
    const int64_t* col_at;
    int64_t ldc;
    bool first;
  };
  template <int NF, int NV>
  __attribute__((target("avx512f,avx512bw,avx512bf16"), noinline)) static void wgrad_rows(const WgradRows& k) {
    __m512 acc[NF][NV];
#pragma GCC unroll 16
    for (int f = 0; f < NF; ++f)
#pragma GCC unroll 4
      for (int e = 0; e < NV; ++e)
        acc[f][e] = k.first ? _mm512_setzero_ps() : _mm512_loadu_ps(k.c + f * k.ldc + k.col_at[e]);
    for (int64_t t = 0; t < k.n; ++t) {
      const uint16_t* a = k.a + t * k.sa;
      const uint32_t* const* rows = k.b + t * kRows;
#pragma GCC unroll 2
      for (int q = 0; q < kRows; ++q) {
        __m512bh bv[NV];
        const uint32_t* b = rows[q];
#pragma GCC unroll 4
        for (int e = 0; e < NV; ++e) bv[e] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + k.off[e]));
#pragma GCC unroll 16
        for (int f = 0; f < NF; ++f) {
          const unsigned char* p = reinterpret_cast<const unsigned char*>(a + f * 32 + 2 * q);
#pragma GCC unroll 4
          for (int e = 0; e < NV; ++e) acc[f][e] = dot_bcast(acc[f][e], bv[e], p);
        }
      }
    }
#pragma GCC unroll 16
    for (int f = 0; f < NF; ++f)
#pragma GCC unroll 4
      for (int e = 0; e < NV; ++e) _mm512_storeu_ps(k.c + f * k.ldc + k.col_at[e], acc[f][e]);
  }

  // acc + the pair at p (broadcast to 16 lanes) times b's 16 pairs: vdpbf16ps with p as its
  // {1to16} memory operand.
  __attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline __m512 dot_bcast(
      __m512 acc, __m512bh b, const unsigned char* p) {
    asm("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(b), "m"(*reinterpret_cast<const int32_t*>(p)));
    return acc;
  }
};

}  // namespace hg::cpu::gemm::amx
