// The AVX512_BF16 micro-kernel: a 14x32 register tile of f32 sums, each step a vdpbf16ps
// that multiplies a pair of k values of A (one dword, broadcast) with the same pair of 16
// columns of B and adds both products into the sum. The instruction adds the pair's high
// element's product first, then the low one's, each product exact (bf16 x bf16 fits f32)
// and each addition rounded once: a fused multiply-add. Packing k = 2q into the high half
// and 2q + 1 into the low half therefore makes every element the same chain, in k order,
// as the f32 kernels: bitwise the AVX2 kernel's result.
//
// Where it deviates: vdpbf16ps reads subnormal inputs as zero and flushes subnormal partial
// sums (DAZ/FTZ, whatever MXCSR says). The repack checks every value (amx::amx_safe: finite,
// zero or >= 2^-56, so all products and partial sums are multiples of 2^-126, never
// subnormal); a panel holding any other value runs through the engine's exact chain instead.
// Results therefore never deviate; only the speed does.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "ops/cpu/gemm/amx.h"
#include "ops/cpu/gemm/kernel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HG_GEMM_AVX512_BF16 1
#endif

namespace hg::cpu::gemm {
namespace {

constexpr int64_t MR = 14, NR = 32;

// Bytes of one converted panel of r rows: ceil(kc / 2) pairs of r dwords.
int64_t pair_panel_bytes(int64_t kc, int64_t r) { return (kc + 1) / 2 * r * 4; }

// One dword: k = 2q in the high half (multiplied first), k = 2q + 1 in the low half.
inline uint32_t pair(float first, float second, bool& ok) {
  uint16_t hi[1], lo[1];
  amx::split<1>(first, hi, ok);
  amx::split<1>(second, lo, ok);
  return static_cast<uint32_t>(hi[0]) << 16 | lo[0];
}

// A panel (MR rows of kc, row-major) into [pair q][row i] dwords; k past kc is zero. One value
// at a time: the reference the AVX-512 conversions below are tested against.
bool pairs_a_scalar(const float* panel, int64_t kc, void* dst) {
  auto* d = static_cast<uint32_t*>(dst);
  bool ok = true;
  for (int64_t i = 0; i < MR; ++i) {
    const float* row = panel + i * kc;
    for (int64_t q = 0; 2 * q < kc; ++q)
      d[q * MR + i] = pair(row[2 * q], 2 * q + 1 < kc ? row[2 * q + 1] : 0.0f, ok);
  }
  return ok;
}

// B panel (kc groups of NR columns) into [pair q][column n] dwords; k past kc is zero.
bool pairs_b_scalar(const float* panel, int64_t kc, void* dst) {
  auto* d = static_cast<uint32_t*>(dst);
  bool ok = true;
  for (int64_t q = 0; 2 * q < kc; ++q) {
    const float* k0 = panel + 2 * q * NR;
    for (int64_t n = 0; n < NR; ++n) d[q * NR + n] = pair(k0[n], 2 * q + 1 < kc ? k0[NR + n] : 0.0f, ok);
  }
  return ok;
}

}  // namespace
}  // namespace hg::cpu::gemm

#ifdef HG_GEMM_AVX512_BF16
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")
// GCC 12's _mm512_reduce_add_ps starts from a deliberately undefined register (`__Y = __Y`).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace hg::cpu::gemm {
namespace {

// 16 f32 values: whether each is not a bf16 amx::split<1> takes (low half nonzero; not
// finite; nonzero below 2^-56).
inline __mmask16 unsafe(__m512i u) {
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 inexact = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0xFFFF));
  const __mmask16 small = _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32(0x23800000));  // 2^-56
  const __mmask16 nonzero = _mm512_test_epi32_mask(mag, mag);
  return inexact | (nonzero & small) | _mm512_cmpge_epu32_mask(mag, _mm512_set1_epi32(0x7F800000));
}

// Pair dwords of two rows' 16 values: (bf16 of first[n]) << 16 | bf16 of second[n].
inline __m512i pair_dwords(__m512i first, __m512i second) {
  return _mm512_or_si512(_mm512_and_si512(first, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))),
                         _mm512_srli_epi32(second, 16));
}

// pairs_a with AVX-512: per row, 32 k values (two loads, zero past kc) into 16 pair dwords by
// one 16-bit permutation (pair q: the high half of value 2q above that of 2q + 1), then the
// 14 rows' dwords put pair-major.
bool pairs_a_avx512(const float* panel, int64_t kc, void* dst) {
  auto* d = static_cast<uint32_t*>(dst);
  // Output word e (of 32): a dword's low half (even e) is value e + 1's bf16, its high half
  // (odd e) value e - 1's; value t's bf16 is the high half of its f32, 16-bit word 2t + 1.
  alignas(64) static constexpr uint16_t kIdx[32] = {3,  1,  7,  5,  11, 9,  15, 13, 19, 17, 23, 21, 27, 25, 31, 29,
                                                    35, 33, 39, 37, 43, 41, 47, 45, 51, 49, 55, 53, 59, 57, 63, 61};
  const __m512i idx = _mm512_load_si512(kIdx);
  __mmask16 bad = 0;
  alignas(64) uint32_t rows[MR][16];
  for (int64_t k0 = 0; k0 < kc; k0 += 32) {
    const int64_t left = kc - k0;
    const __mmask16 m0 = left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
    const __mmask16 m1 = left >= 32 ? __mmask16(0xFFFF) : left <= 16 ? 0 : static_cast<__mmask16>((1u << (left - 16)) - 1);
    for (int64_t i = 0; i < MR; ++i) {
      const __m512i lo = _mm512_maskz_loadu_epi32(m0, panel + i * kc + k0);
      const __m512i hi = _mm512_maskz_loadu_epi32(m1, panel + i * kc + k0 + 16);
      bad |= unsafe(lo) | unsafe(hi);
      _mm512_store_si512(rows[i], _mm512_permutex2var_epi16(lo, idx, hi));
    }
    const int64_t pairs = std::min<int64_t>(16, (left + 1) / 2);
    for (int64_t q = 0; q < pairs; ++q)
      for (int64_t i = 0; i < MR; ++i) d[(k0 / 2 + q) * MR + i] = rows[i][q];
  }
  return bad == 0;
}

// pairs_b with AVX-512: two k rows of 32 columns into 32 pair dwords, 16 at a time.
bool pairs_b_avx512(const float* panel, int64_t kc, void* dst) {
  auto* d = static_cast<uint32_t*>(dst);
  __mmask16 bad = 0;
  for (int64_t q = 0; 2 * q < kc; ++q) {
    const float* k0 = panel + 2 * q * NR;
    const bool second = 2 * q + 1 < kc;
    for (int64_t n = 0; n < NR; n += 16) {
      const __m512i a = _mm512_loadu_si512(k0 + n);
      const __m512i b = second ? _mm512_loadu_si512(k0 + NR + n) : _mm512_setzero_si512();
      bad |= unsafe(a) | unsafe(b);
      _mm512_storeu_si512(d + q * NR + n, pair_dwords(a, b));
    }
  }
  return bad == 0;
}

// V vectors of 16 columns per row: 2 for the full tile, 1 for a half tile.
template <int V>
void tile(int64_t kc, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool first) {
  __m512 acc[MR][V];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + i * ldc + 16 * v);
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t q = 0; q < pairs; ++q, a += MR, b += NR) {
    __m512bh bv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) bv[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 16 * v));
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[i])));
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], x, bv[v]);
    }
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}

void bf16_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  const auto* pa = static_cast<const uint32_t*>(a);
  const auto* pb = static_cast<const uint32_t*>(b);
  if (half)
    tile<1>(kc, pa, pb, c, ldc, first);
  else
    tile<2>(kc, pa, pb, c, ldc, first);
}

// Bursts of independent chains (enough to cover the latency on two pipes), for the probe.
double dot_burst(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512bh m = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3F80));
  const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3400));
  for (int64_t k = 0; k < iters; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], m, x);
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
}

double fma_burst(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999999f), x = _mm512_set1_ps(1e-7f);
  for (int64_t k = 0; k < iters; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, x);
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
}

}  // namespace
}  // namespace hg::cpu::gemm

#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace hg::cpu::gemm {

const Kernel<float>& avx512_bf16_kernel() {
#ifdef HG_GEMM_AVX512_BF16
  static const Kernel<float> k{"avx512_bf16 bf16 pairs 14x32", MR, NR, bf16_fn, pair_panel_bytes, pairs_a_avx512,
                               pairs_b_avx512, 1};
#else
  static const Kernel<float> k = avx2_kernel();
#endif
  return k;
}

bool avx512_bf16_pairs(bool a_panel, bool vector, const float* panel, int64_t kc, void* dst) {
#ifdef HG_GEMM_AVX512_BF16
  if (vector) return a_panel ? pairs_a_avx512(panel, kc, dst) : pairs_b_avx512(panel, kc, dst);
#endif
  return a_panel ? pairs_a_scalar(panel, kc, dst) : pairs_b_scalar(panel, kc, dst);
}

namespace {

double measure_dot_vs_fma() {
#ifdef HG_GEMM_AVX512_BF16
  // Alternating bursts of 0.1-0.2 ms, the best of each kind (a busy neighbour slows both
  // alike), after a warm-up: a core runs its first tens of microseconds of 512-bit work at a
  // reduced rate, which would make both look alike. Each vdpbf16ps does 32 multiply-adds per
  // 16 lanes, an FMA 16.
  constexpr int64_t iters = 40000;
  double best_dot = 1e30, best_fma = 1e30, sink = fma_burst(2 * iters);
  for (int round = 0; round < 12; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    sink += dot_burst(iters);
    auto t1 = std::chrono::steady_clock::now();
    sink += fma_burst(iters);
    auto t2 = std::chrono::steady_clock::now();
    best_dot = std::min(best_dot, std::chrono::duration<double>(t1 - t0).count());
    best_fma = std::min(best_fma, std::chrono::duration<double>(t2 - t1).count());
  }
  static volatile double keep;  // the bursts' results are used: the compiler keeps them
  keep = sink;
  (void)keep;
  return 2.0 * best_fma / best_dot;
#else
  return 0;
#endif
}

}  // namespace

double avx512_bf16_dot_vs_fma() {
  static const double ratio = measure_dot_vs_fma();  // once per process: every caller sees one verdict
  return ratio;
}

}  // namespace hg::cpu::gemm
