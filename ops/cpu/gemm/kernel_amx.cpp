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
#include "ops/cpu/gemm/amx_hardware.h"

namespace hg::cpu::gemm {
namespace {

using amx::HardwareTiles;

void bf16_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  amx::tile_kernel<HardwareTiles, 1>(kc, a, b, c, ldc, first, half);
}

void begin_fn() { amx::begin<HardwareTiles>(); }
void end_fn() { amx::end<HardwareTiles>(); }

void f16_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  amx::tile_kernel<HardwareTiles, 2>(kc, a, b, c, ldc, first, half);
}

}  // namespace
}  // namespace hg::cpu::gemm

#pragma GCC pop_options

// The panel conversions with AVX-512 (every AMX CPU has it; isa() == amx implies the avx512
// path): the same bytes and verdict as amx::repack_a/repack_b, 16 values per instruction
// instead of a scalar split per value (which took more time than the tile products). In
// their own target region so no inline function of amx.h is compiled with AVX-512.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")
// GCC 12's AVX-512 headers start some intrinsics from a deliberately undefined register
// (`__m512 __Y = __Y;`), which -Wmaybe-uninitialized reports at every inlined use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace hg::cpu::gemm {
namespace {

// 16 values into `Planes` words each, the bf16 in the high half and zero below where the
// value is exact (a value amx::split refuses is zero in every plane); lanes failing the
// exactness rule are added to `bad`. The same arithmetic as amx::split, lane by lane.
template <int Planes>
inline void planes16(__m512 x, __m512i w[Planes], __mmask16& bad) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  // amx_safe: zero, or finite and at least 2^-56 (bits 0x23800000) in magnitude.
  const __mmask16 safe = _mm512_cmpeq_epi32_mask(mag, _mm512_setzero_si512()) |
                         (_mm512_cmpge_epu32_mask(mag, _mm512_set1_epi32(0x23800000)) &
                          _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32(0x7F800000)));
  if constexpr (Planes == 1) {
    const __mmask16 whole = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0xFFFF));  // a bf16 value
    bad |= static_cast<__mmask16>(~(safe & whole));
    w[0] = _mm512_maskz_mov_epi32(safe, u);
  } else {
    // hi = bf16 nearest x (ties to even), lo = x - hi (exact for an f16 x).
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i hi = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))),
                                        _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
    const __m512 lo = _mm512_sub_ps(x, _mm512_castsi512_ps(hi));
    const __m512 round_trip = _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __mmask16 is_f16 = _mm512_cmp_ps_mask(round_trip, x, _CMP_EQ_OQ);
    bad |= static_cast<__mmask16>(~(safe & is_f16));
    w[0] = _mm512_maskz_mov_epi32(safe, hi);
    w[1] = _mm512_maskz_mov_epi32(safe, _mm512_castps_si512(lo));
  }
}

// Loads 16 floats, the lanes at or past `live` as zero.
inline __m512 load16(const float* p, int64_t live) {
  if (live >= 16) return _mm512_loadu_ps(p);
  if (live <= 0) return _mm512_setzero_ps();
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << live) - 1), p);
}

// As amx::repack_a: tiles [k step][plane][row group], each 16 rows of 32 bf16.
template <int Planes>
bool repack_a_avx512(const float* panel, int64_t kc, void* dst) {
  auto* d = static_cast<uint16_t*>(dst);
  __mmask16 bad = 0;
  // The odd 16-bit words of two registers: the high halves, i.e. the 32 bf16 in order.
  const __m512i high_words = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29,
                                              27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (int64_t k0 = 0; k0 < kc; k0 += amx::kK)
    for (int64_t r = 0; r < amx::MR; ++r) {
      const float* src = panel + r * kc + k0;
      __m512i w0[Planes], w1[Planes];
      planes16<Planes>(load16(src, kc - k0), w0, bad);
      planes16<Planes>(load16(src + 16, kc - k0 - 16), w1, bad);
      const int64_t g = r / amx::kRows;
      for (int p = 0; p < Planes; ++p)
        _mm512_storeu_si512(d + (((k0 / amx::kK) * Planes + p) * 2 + g) * amx::kRows * amx::kK + (r % amx::kRows) * amx::kK,
                            _mm512_permutex2var_epi16(w0[p], high_words, w1[p]));
    }
  return bad == 0;
}

// As amx::repack_b: VNNI tiles [k step][plane][column group], row q = k pair (2q, 2q + 1).
template <int Planes>
bool repack_b_avx512(const float* panel, int64_t kc, void* dst) {
  auto* d = static_cast<uint16_t*>(dst);
  __mmask16 bad = 0;
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int64_t k0 = 0; k0 < kc; k0 += amx::kK)
    for (int64_t q = 0; q < amx::kK / 2; ++q) {
      const int64_t k = k0 + 2 * q;
      for (int64_t g = 0; g < amx::NR / 16; ++g) {
        const __m512 even = k < kc ? _mm512_loadu_ps(panel + k * amx::NR + g * 16) : _mm512_setzero_ps();
        const __m512 odd = k + 1 < kc ? _mm512_loadu_ps(panel + (k + 1) * amx::NR + g * 16) : _mm512_setzero_ps();
        __m512i we[Planes], wo[Planes];
        planes16<Planes>(even, we, bad);
        planes16<Planes>(odd, wo, bad);
        for (int p = 0; p < Planes; ++p)
          _mm512_storeu_si512(d + (((k0 / amx::kK) * Planes + p) * 2 + g) * amx::kRows * amx::kK + q * amx::kK,
                              _mm512_or_si512(_mm512_and_si512(wo[p], top), _mm512_srli_epi32(we[p], 16)));
      }
    }
  return bad == 0;
}

}  // namespace
}  // namespace hg::cpu::gemm

#pragma GCC diagnostic pop
#pragma GCC pop_options
#else
#include "ops/cpu/gemm/amx.h"
#endif

namespace hg::cpu::gemm {

const Kernel<float>& amx_bf16_kernel() {
#ifdef HG_GEMM_AMX
  static const Kernel<float> k{"amx bf16 32x32", amx::MR, amx::NR, bf16_fn, amx::panel_bytes<1>, repack_a_avx512<1>,
                               repack_b_avx512<1>, 1, begin_fn, end_fn};
#else
  static const Kernel<float> k = avx2_kernel();
#endif
  return k;
}

const Kernel<float>& amx_f16_kernel() {
#ifdef HG_GEMM_AMX
  static const Kernel<float> k{"amx f16 (hi+lo bf16) 32x32", amx::MR, amx::NR, f16_fn, amx::panel_bytes<2>,
                               repack_a_avx512<2>, repack_b_avx512<2>, 4, begin_fn, end_fn};
#else
  static const Kernel<float> k = avx2_kernel();
#endif
  return k;
}

}  // namespace hg::cpu::gemm
