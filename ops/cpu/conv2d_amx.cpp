// The direct AMX convolution (conv2d_amx.h) on the real tile unit and on AVX512_BF16's
// vdpbf16ps, its entry points and each unit's first-use self-check. The AMX kernels compile
// in an AMX target region (the library stays x86-64-v3) and run only when isa() == amx.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "framework/cpu/isa.h"
#include "framework/dtype.h"
#include "ops/cpu/gemm/engine.h"
#include "ops/cpu/gemm/kernel.h"
#include "ops/cpu/loops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16")
// As in kernel_amx.cpp: amx.h and the kernel templates compile here, so the tile
// instructions inline; none of their code uses AVX-512.
#include "ops/cpu/conv2d_amx.h"
#include "ops/cpu/conv2d_amx_wgrad.h"
#include "ops/cpu/gemm/amx_hardware.h"

namespace hg::cpu::amx_conv {
// The entry points' tile runs, compiled here for the tile instructions to inline.
template bool forward_on<amx::HardwareTiles, bfloat16>(const Sizes&, const bfloat16*, const bfloat16*, const float*,
                                                        bfloat16*, int, int64_t);
template bool forward_on<amx::HardwareTiles, half>(const Sizes&, const half*, const half*, const float*, half*, int, int64_t);
template bool dgrad_on<amx::HardwareTiles, bfloat16>(const Sizes&, const bfloat16*, const bfloat16*, const float*,
                                                      bfloat16*, int, int64_t);
template bool dgrad_on<amx::HardwareTiles, half>(const Sizes&, const half*, const half*, const float*, half*, int, int64_t);
template bool wgrad_on<amx::HardwareTiles, bfloat16>(const Sizes&, const bfloat16*, const bfloat16*, bfloat16*, int, int64_t);
template bool wgrad_on<amx::HardwareTiles, half>(const Sizes&, const half*, const half*, half*, int, int64_t);
}  // namespace hg::cpu::amx_conv
#pragma GCC pop_options
#define HG_CONV_AMX 1
// The same runs on AVX512_BF16 (vdpbf16ps); only its tile product uses AVX-512 (a function of
// its own), so these compile for the library's baseline.
#include "ops/cpu/gemm/amx_dpbf16.h"
namespace hg::cpu::amx_conv {
template bool forward_on<amx::DotTiles, bfloat16>(const Sizes&, const bfloat16*, const bfloat16*, const float*,
                                                   bfloat16*, int, int64_t);
template bool dgrad_on<amx::DotTiles, bfloat16>(const Sizes&, const bfloat16*, const bfloat16*, const float*,
                                                 bfloat16*, int, int64_t);
template bool wgrad_on<amx::DotTiles, bfloat16>(const Sizes&, const bfloat16*, const bfloat16*, bfloat16*, int, int64_t);
}  // namespace hg::cpu::amx_conv
#else
#include "ops/cpu/conv2d_amx.h"
#include "ops/cpu/conv2d_amx_wgrad.h"
#endif

#if defined(__x86_64__)
// The row conversions with AVX-512 (every AMX CPU has it): the same bits and verdicts as the
// scalar ones below, 32 bf16 or 16 f16 values per step.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace hg::cpu::amx_conv {
namespace {

bool bf16_rows_avx512(const bfloat16* src, int64_t n, uint16_t* dst) {
  const __m512i mask = _mm512_set1_epi16(0x7FFF), low = _mm512_set1_epi16(0x2380), inf = _mm512_set1_epi16(0x7F80);
  __mmask32 bad = 0;
  auto check = [&](__m512i v) {
    const __m512i mag = _mm512_and_si512(v, mask);
    bad |= _mm512_test_epi16_mask(mag, mag) & (_mm512_cmplt_epu16_mask(mag, low) | _mm512_cmpge_epu16_mask(mag, inf));
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {  // unmasked: streaming, masked loads + stores took Zen 5 1.9x a plain copy
    const __m512i v = _mm512_loadu_si512(src + i);
    _mm512_storeu_si512(dst + i, v);
    check(v);
  }
  if (i < n) {
    const __mmask32 live = static_cast<__mmask32>((1u << (n - i)) - 1);
    const __m512i v = _mm512_maskz_loadu_epi16(live, src + i);
    _mm512_mask_storeu_epi16(dst + i, live, v);
    check(v);
  }
  return bad == 0;
}

bool f16_rows_avx512(const half* src, int64_t n, uint16_t* hi_out, uint16_t* lo_out) {
  const __m256i exp = _mm256_set1_epi16(0x7C00);
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)), one = _mm512_set1_epi32(1),
                half_ulp = _mm512_set1_epi32(0x7FFF);
  __mmask16 bad = 0;
  // hi = the bf16 nearest x (ties to even), lo = x - hi: exact for an f16 x (amx.h).
  auto split = [&](__m256i h, __m256i& hi16, __m256i& lo16) {
    bad |= _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, exp), exp);  // inf or NaN
    const __m512 x = _mm512_cvtph_ps(h);
    const __m512i u = _mm512_castps_si512(x);
    const __m512i hi = _mm512_and_si512(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(u, 16), one), half_ulp)), top);
    const __m512 lo = _mm512_sub_ps(x, _mm512_castsi512_ps(hi));
    hi16 = _mm512_cvtepi32_epi16(_mm512_srli_epi32(hi, 16));
    lo16 = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(lo), 16));
  };
  __m256i hi16, lo16;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // unmasked, as in bf16_rows_avx512
    split(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)), hi16, lo16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi_out + i), hi16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo_out + i), lo16);
  }
  if (i < n) {
    const __mmask16 live = static_cast<__mmask16>((1u << (n - i)) - 1);
    split(_mm256_maskz_loadu_epi16(live, src + i), hi16, lo16);
    _mm256_mask_storeu_epi16(hi_out + i, live, hi16);
    _mm256_mask_storeu_epi16(lo_out + i, live, lo16);
  }
  return bad == 0;
}

// v + bias rounded to bf16 (ties to even; a NaN keeps its top bits, quiet), as float_to_bf16_bits.
inline __m256i bf16_of(__m512 v) {
  const __m512i x = _mm512_castps_si512(v), top = _mm512_srli_epi32(x, 16);
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(x, _mm512_add_epi32(_mm512_and_si512(top, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFF))),
      16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(r, nan, top, _mm512_set1_epi32(0x40)));
}

template <class T>
void store_rows_avx512(const float* c, int64_t ldc, int64_t rows, int64_t F, const float* bias, T* dst, int64_t ld) {
  auto rounded = [](__m512 v) {
    if constexpr (std::is_same_v<T, half>)
      return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    else
      return bf16_of(v);
  };
  const int64_t full = F / 16 * 16;
  const __mmask16 live = static_cast<__mmask16>((1u << (F - full)) - 1);
  for (int64_t i = 0; i < rows; ++i, c += ldc, dst += ld) {
    for (int64_t j = 0; j < full; j += 16) {  // unmasked, as in bf16_rows_avx512
      __m512 v = _mm512_loadu_ps(c + j);
      if (bias) v = _mm512_add_ps(v, _mm512_loadu_ps(bias + j));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), rounded(v));
    }
    if (full < F) {
      __m512 v = _mm512_maskz_loadu_ps(live, c + full);
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(live, bias + full));
      _mm256_mask_storeu_epi16(dst + full, live, rounded(v));
    }
  }
}

// interleave_pairs, 32 words per step: (lo, hi) 16-bit lanes unpacked within 128-bit lanes,
// then the four lane pairs put back in order.
int64_t interleave_pairs_avx512(const uint16_t* z, int64_t count, int64_t avail, int64_t C, uint32_t* v) {
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  int64_t t = 0;
  for (; t + 32 <= count && t + 32 + C <= avail; t += 32) {
    const __m512i lo = _mm512_loadu_si512(z + t), hi = _mm512_loadu_si512(z + t + C);
    const __m512i p0 = _mm512_unpacklo_epi16(lo, hi), p1 = _mm512_unpackhi_epi16(lo, hi);
    _mm512_storeu_si512(v + t, _mm512_permutex2var_epi64(p0, first, p1));
    _mm512_storeu_si512(v + t + 16, _mm512_permutex2var_epi64(p0, second, p1));
  }
  return t;
}

}  // namespace
}  // namespace hg::cpu::amx_conv
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace hg::cpu::amx_conv {

#if defined(__AVX2__)
namespace {

// dst[j * ld_dst + i] = src[i * ld_src + j] for a 16 x 16 block of 16-bit values: 16-bit,
// 32-bit and 64-bit interleaves within 128-bit lanes, then the lanes recombined.
inline void transpose16x16(const uint16_t* src, int64_t ld_src, uint16_t* dst, int64_t ld_dst) {
  __m256i a[16], b[16], c[16], d[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * ld_src));
  for (int i = 0; i < 8; ++i) {  // rows 2i, 2i+1: columns 0-3 | 8-11, then 4-7 | 12-15
    b[2 * i] = _mm256_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm256_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // rows 4g..4g+3: column pairs (0,1 | 8,9), (2,3 | 10,11), ...
    c[4 * g] = _mm256_unpacklo_epi32(b[4 * g], b[4 * g + 2]);
    c[4 * g + 1] = _mm256_unpackhi_epi32(b[4 * g], b[4 * g + 2]);
    c[4 * g + 2] = _mm256_unpacklo_epi32(b[4 * g + 1], b[4 * g + 3]);
    c[4 * g + 3] = _mm256_unpackhi_epi32(b[4 * g + 1], b[4 * g + 3]);
  }
  for (int h = 0; h < 2; ++h)  // rows 8h..8h+7: column m | 8 + m in d[8h + m]
    for (int j = 0; j < 4; ++j) {
      d[8 * h + 2 * j] = _mm256_unpacklo_epi64(c[8 * h + j], c[8 * h + 4 + j]);
      d[8 * h + 2 * j + 1] = _mm256_unpackhi_epi64(c[8 * h + j], c[8 * h + 4 + j]);
    }
  for (int m = 0; m < 8; ++m) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + m * ld_dst), _mm256_permute2x128_si256(d[m], d[8 + m], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (m + 8) * ld_dst),
                        _mm256_permute2x128_si256(d[m], d[8 + m], 0x31));
  }
}

}  // namespace
#endif

void transpose16(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld_src, uint16_t* dst, int64_t ld_dst) {
  int64_t i0 = 0;
#if defined(__AVX2__)
  for (; i0 + 16 <= rows; i0 += 16) {
    int64_t j0 = 0;
    for (; j0 + 16 <= cols; j0 += 16) transpose16x16(src + i0 * ld_src + j0, ld_src, dst + j0 * ld_dst + i0, ld_dst);
    for (int64_t j = j0; j < cols; ++j)
      for (int64_t i = i0; i < i0 + 16; ++i) dst[j * ld_dst + i] = src[i * ld_src + j];
  }
#endif
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = i0; i < rows; ++i) dst[j * ld_dst + i] = src[i * ld_src + j];
}

void interleave_pairs(const uint16_t* z, int64_t count, int64_t avail, int64_t C, uint32_t* v) {
  int64_t t = 0;
#if defined(__x86_64__)
  if (features().avx512bw) t = interleave_pairs_avx512(z, count, avail, C, v);
#endif
#if defined(__AVX2__)
  for (; t + 16 <= count && t + 16 + C <= avail; t += 16) {  // 16 words: (z[t], z[t + C]) ... in order
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(z + t));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(z + t + C));
    const __m256i p0 = _mm256_unpacklo_epi16(lo, hi), p1 = _mm256_unpackhi_epi16(lo, hi);  // words 0-3, 8-11 | 4-7, 12-15
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + t), _mm256_permute2x128_si256(p0, p1, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + t + 8), _mm256_permute2x128_si256(p0, p1, 0x31));
  }
#endif
  for (; t < count; ++t) v[t] = z[t] | (t + C < avail ? static_cast<uint32_t>(z[t + C]) << 16 : 0u);
}

template <class T>
static void store_rows_any(const float* c, int64_t ldc, int64_t rows, int64_t F, const float* bias, T* dst, int64_t ld) {
#if defined(__x86_64__)
  if (features().avx512bw && features().avx512vl) return store_rows_avx512(c, ldc, rows, F, bias, dst, ld);
#endif
  const gemm::Output out{dst, dtype_of<T>::value, 1, rows, 0, 0, ld, 1};
  gemm::Epilogue<float> ep;
  ep.bias = bias;
  gemm::store_tile<float>(c, ldc, 0, rows, 0, F, out, ep);
}

template <>
void store_rows<bfloat16>(const float* c, int64_t ldc, int64_t rows, int64_t F, const float* bias, bfloat16* dst,
                          int64_t ld) {
  store_rows_any(c, ldc, rows, F, bias, dst, ld);
}
template <>
void store_rows<half>(const float* c, int64_t ldc, int64_t rows, int64_t F, const float* bias, half* dst, int64_t ld) {
  store_rows_any(c, ldc, rows, F, bias, dst, ld);
}

template <>
bool to_planes_scalar<bfloat16>(const bfloat16* src, int64_t n, uint16_t* const dst[2]) {
  unsigned bad = 0;
  for (int64_t i = 0; i < n; ++i) dst[0][i] = src[i].bits, bad |= !bf16_safe(src[i].bits);
  return bad == 0;
}

template <>
bool to_planes_scalar<half>(const half* src, int64_t n, uint16_t* const dst[2]) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v[2];
    amx::split<2>(static_cast<float>(src[i]), v, ok);
    dst[0][i] = v[0], dst[1][i] = v[1];
  }
  return ok;
}

template <>
bool to_planes<bfloat16>(const bfloat16* src, int64_t n, uint16_t* const dst[2]) {
#if defined(__x86_64__)
  if (features().avx512bw) return bf16_rows_avx512(src, n, dst[0]);
#endif
  return to_planes_scalar(src, n, dst);
}

template <>
bool to_planes<half>(const half* src, int64_t n, uint16_t* const dst[2]) {
#if defined(__x86_64__)
  if (features().avx512bw && features().avx512vl) return f16_rows_avx512(src, n, dst[0], dst[1]);
#endif
  return to_planes_scalar(src, n, dst);
}

namespace {

// Forward on a small convolution (odd channels: partial k steps; 20 filters: both block
// shapes; padding) against an f64 sum, within the bound of f32 accumulation (4 terms per
// product for the f16 split): a unit that sums wrongly, reads the wrong rows or drops a
// plane fails it.
template <class T>
bool check(Unit unit_under_test) {
  const Sizes s{2, 9, 11, 5, 20, 3, 3, 9, 11, 1, 1, 1};
  std::vector<T> x(static_cast<size_t>(s.N * s.H * s.W * s.C)), w(static_cast<size_t>(s.K * s.R * s.S * s.C));
  uint32_t seed = 12345;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<double>(seed >> 8) / 16777216.0 - 0.5;
  };
  for (T& v : x) v = store<T>(8.0 * next());
  for (T& v : w) v = store<T>(next() / 3.0);
  std::vector<float> bias(static_cast<size_t>(s.K), 0.25f);
  std::vector<T> yt(static_cast<size_t>(s.N * s.P * s.Q * s.K));
  if (!forward<T>(unit_under_test, s, x.data(), w.data(), bias.data(), yt.data(), 1)) return false;
  const double u = std::is_same_v<T, half> ? 0x1p-11 : 0x1p-8, acc = 0x1p-24 * s.R * s.S * s.C * 8;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t p = 0; p < s.P; ++p)
      for (int64_t q = 0; q < s.Q; ++q)
        for (int64_t k = 0; k < s.K; ++k) {
          double sum = bias[static_cast<size_t>(k)], mag = std::fabs(sum);
          for (int64_t r = 0; r < s.R; ++r)
            for (int64_t t = 0; t < s.S; ++t)
              for (int64_t c = 0; c < s.C; ++c) {
                const int64_t h = p - s.ph + r * s.dh, v = q - s.pw + t;
                if (h < 0 || h >= s.H || v < 0 || v >= s.W) continue;
                const double a = load(x[static_cast<size_t>(((n * s.H + h) * s.W + v) * s.C + c)]);
                const double b = load(w[static_cast<size_t>(((k * s.R + r) * s.S + t) * s.C + c)]);
                sum += a * b, mag += std::fabs(a * b);
              }
          const double got = load(yt[static_cast<size_t>(((n * s.P + p) * s.Q + q) * s.K + k)]);
          if (!(std::fabs(got - sum) <= u * std::fabs(sum) + acc * mag + 1e-30)) return false;
        }
  return true;
}

// A unit's verdict: its self-check runs once, on first use.
struct Verdict {
  std::once_flag once;
  std::atomic<bool> ok{false};
};

bool passes(Verdict& v, Unit u, const char* name) {
  std::call_once(v.once, [&] {
    const bool ok = check<bfloat16>(u) && (!multiplies<half>(u) || check<half>(u));
    if (!ok)
      std::fprintf(stderr,
                   "halfgrad: the direct convolution on %s failed its self-check on this CPU; convolutions use the "
                   "GEMM engine and the f32 tiles instead\n",
                   name);
    v.ok = ok;
  });
  return v.ok.load();
}

Verdict g_amx, g_dpbf16;
std::atomic<int> g_off{0};

// HG_CONV_TILES=off: no direct tile convolution in this process (A/B runs of a whole step).
bool off_by_environment() {
  static const bool off = [] {
    const char* env = std::getenv("HG_CONV_TILES");
    return env && std::strcmp(env, "off") == 0;
  }();
  return off;
}

}  // namespace

TilesOff::TilesOff() { ++g_off; }
TilesOff::~TilesOff() { --g_off; }

Unit unit() {
  if (g_off.load(std::memory_order_relaxed) > 0 || off_by_environment()) return Unit::none;
  if (isa() == Isa::amx) {
#ifdef HG_CONV_AMX
    if (passes(g_amx, Unit::amx, "the AMX tile unit")) return Unit::amx;
#endif
    return Unit::none;
  }
#if defined(__x86_64__)
  if (isa() == Isa::avx512 && gemm::bf16_pairs_pay() && passes(g_dpbf16, Unit::dpbf16, "AVX512_BF16 (vdpbf16ps)"))
    return Unit::dpbf16;
#endif
  return Unit::none;
}

template <class T>
bool forward(Unit u, const Sizes& s, const T* x, const T* w, const float* bias, T* y, int threads) {
#if defined(__x86_64__)
  if (u == Unit::dpbf16 && multiplies<T>(u)) return forward_on<amx::DotTiles>(s, x, w, bias, y, threads);
#endif
#ifdef HG_CONV_AMX
  if (u == Unit::amx) return forward_on<amx::HardwareTiles>(s, x, w, bias, y, threads);
#endif
  (void)s, (void)x, (void)w, (void)bias, (void)y, (void)threads;
  return false;
}

template <class T>
bool dgrad(Unit u, const Sizes& s, const T* gy, const T* w, const float* bias, T* gx, int threads) {
#if defined(__x86_64__)
  if (u == Unit::dpbf16 && multiplies<T>(u)) return dgrad_on<amx::DotTiles>(s, gy, w, bias, gx, threads);
#endif
#ifdef HG_CONV_AMX
  if (u == Unit::amx) return dgrad_on<amx::HardwareTiles>(s, gy, w, bias, gx, threads);
#endif
  (void)s, (void)gy, (void)w, (void)bias, (void)gx, (void)threads;
  return false;
}

template <class T>
bool wgrad(Unit u, const Sizes& s, const T* gy, const T* x, T* gw, int threads) {
#if defined(__x86_64__)
  if (u == Unit::dpbf16 && multiplies<T>(u)) return wgrad_on<amx::DotTiles>(s, gy, x, gw, threads);
#endif
#ifdef HG_CONV_AMX
  if (u == Unit::amx) return wgrad_on<amx::HardwareTiles>(s, gy, x, gw, threads);
#endif
  (void)s, (void)gy, (void)x, (void)gw, (void)threads;
  return false;
}

template bool wgrad<bfloat16>(Unit, const Sizes&, const bfloat16*, const bfloat16*, bfloat16*, int);
template bool wgrad<half>(Unit, const Sizes&, const half*, const half*, half*, int);
template bool forward<bfloat16>(Unit, const Sizes&, const bfloat16*, const bfloat16*, const float*, bfloat16*, int);
template bool forward<half>(Unit, const Sizes&, const half*, const half*, const float*, half*, int);
template bool dgrad<bfloat16>(Unit, const Sizes&, const bfloat16*, const bfloat16*, const float*, bfloat16*, int);
template bool dgrad<half>(Unit, const Sizes&, const half*, const half*, const float*, half*, int);

}  // namespace hg::cpu::amx_conv
