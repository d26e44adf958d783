// The few-filter 1x1 convolution (conv2d_pointwise.h) on AVX2 vectors of eight f32.
#include "ops/cpu/conv2d_pointwise.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "framework/bfloat16.h"
#include "framework/half.h"
#include "ops/cpu/loops.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define HG_POINTWISE_AVX2 1
#include <immintrin.h>

#include "framework/half_convert_x86.h"
#endif

namespace hg::cpu::pointwise {

#ifdef HG_POINTWISE_AVX2
namespace {

// Channel pairs of eight pixels (lanes), from base (pixel 0 of the eight) with `row` (even)
// f16/bf16 values per pixel: dword(c) holds channels c and c + 1 of each pixel. Lanes past
// `live` read nothing and hold zero.
template <class T>
struct Gather {
  __m256i idx, mask;
  const T* base;
  Gather(const T* b, int64_t row, int64_t live) : base(b) {
    idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int32_t>(row / 2)));
    mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(live)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  __m256i dword(int64_t c) const {
    const int* p = reinterpret_cast<const int*>(base + c);
    return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), p, idx, mask, 4);
  }
};

// Channel c and c + 1 of eight pixels as f32 (exact), from the dwords holding both.
struct Pair {
  __m256 lo, hi;
};
inline Pair split_pair(__m256i d, bfloat16) {
  return {_mm256_castsi256_ps(_mm256_slli_epi32(d, 16)),
          _mm256_castsi256_ps(_mm256_and_si256(d, _mm256_set1_epi32(static_cast<int>(0xffff0000u))))};
}
inline Pair split_pair(__m256i d, half) {
  const __m256i lo = _mm256_and_si256(d, _mm256_set1_epi32(0xffff)), hi = _mm256_srli_epi32(d, 16);
  // packus per 128-bit lane: [lo 0-3, hi 0-3 | lo 4-7, hi 4-7] -> [lo 0-7 | hi 0-7]
  const __m256i both = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
  return {_mm256_cvtph_ps(_mm256_castsi256_si128(both)), _mm256_cvtph_ps(_mm256_extracti128_si256(both, 1))};
}

// Eight pixels' K outputs: sum[k] chains c ascending from zero (the engine's order).
template <int K, class T>
void forward8(const T* x, int64_t C, const float* w, const float* bias, T* y, int64_t live) {
  const Gather<T> g(x, C, live);
  __m256 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm256_setzero_ps();
  const auto step = [&](__m256 v, int64_t c) {
    for (int k = 0; k < K; ++k) acc[k] = _mm256_fmadd_ps(v, _mm256_broadcast_ss(w + k * C + c), acc[k]);
  };
  for (int64_t c = 0; c < C; c += 2) {
    const auto [lo, hi] = split_pair(g.dword(c), T{});
    step(lo, c);
    step(hi, c + 1);
  }
  alignas(32) T out[K][8];
  for (int k = 0; k < K; ++k) {
    const __m256 v = bias ? _mm256_add_ps(acc[k], _mm256_set1_ps(bias[k])) : acc[k];
    x86::store8(out[k], v);
  }
  for (int64_t i = 0; i < live; ++i)
    for (int k = 0; k < K; ++k) y[i * K + k] = out[k][i];
}

template <int K, class T>
void forward_k(const T* x, int64_t M, int64_t C, const float* w, const float* bias, T* y, int threads) {
  constexpr int64_t kBlock = 2048;  // pixels per task
  const int64_t blocks = (M + kBlock - 1) / kBlock;
  parallel_static(std::min<int64_t>(threads, blocks), blocks, [&](int64_t b) {
    const int64_t end = std::min(M, (b + 1) * kBlock);
    for (int64_t m = b * kBlock; m < end; m += 8)
      forward8<K>(x + m * C, C, w, bias, y + m * K, std::min<int64_t>(8, end - m));
  });
}

// One value widened exactly, as an FMA operand (the FMA quiets a NaN): f16 by the F16C
// instruction, bf16 by a shift, not half.h / bfloat16.h portable code.
inline float widen1(float v) { return v; }
inline float widen1(bfloat16 v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }
inline float widen1(half v) { return _cvtsh_ss(v.bits); }

// Channels [c0, c0 + 8 V) of the chunk's weight gradient: K x V vector sums over the pixels.
template <int K, int V, class T>
void wgrad_block(const T* gy, const T* x, int64_t n, int64_t C, int64_t c0, float* acc) {
  __m256 sum[K][V];
  for (int k = 0; k < K; ++k)
    for (int v = 0; v < V; ++v) sum[k][v] = _mm256_setzero_ps();
  for (int64_t m = 0; m < n; ++m) {
    __m256 xv[V];
    for (int v = 0; v < V; ++v) xv[v] = x86::load8_operand(x + m * C + c0 + 8 * v);
    for (int k = 0; k < K; ++k) {
      const __m256 g = _mm256_set1_ps(widen1(gy[m * K + k]));
      for (int v = 0; v < V; ++v) sum[k][v] = _mm256_fmadd_ps(g, xv[v], sum[k][v]);
    }
  }
  for (int k = 0; k < K; ++k)
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(acc + k * C + c0 + 8 * v, sum[k][v]);
}

// Up to 12 vector sums in registers: V = 12 / K channel vectors per block.
template <int K, class T>
void wgrad_k(const T* gy, const T* x, int64_t n, int64_t C, float* acc) {
  constexpr int V = std::max(1, 12 / K);
  int64_t c0 = 0;
  for (; c0 + 8 * V <= C; c0 += 8 * V) wgrad_block<K, V>(gy, x, n, C, c0, acc);
  [&]<int... I>(std::integer_sequence<int, I...>) {  // the last block: fewer vectors
    const int left = static_cast<int>((C - c0) / 8);
    ((left == I + 1 ? wgrad_block<K, I + 1>(gy, x, n, C, c0, acc) : void()), ...);
  }(std::make_integer_sequence<int, V - 1>{});
}

template <class F>
void with_k(int64_t K, F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((K == I + 1 ? f(std::integral_constant<int, I + 1>{}) : void()), ...);
  }(std::make_integer_sequence<int, kMaxFilters>{});
}

}  // namespace

bool forward_fits(int64_t K, int64_t C) {
  return K >= 1 && K <= kMaxForwardFilters && C >= 2 && C % 2 == 0 && C < (int64_t{1} << 27);
}
bool wgrad_fits(int64_t K, int64_t C) { return K >= 1 && K <= kMaxFilters && C >= 8 && C % 8 == 0; }

template <class T>
void forward(const T* x, int64_t M, int64_t C, const float* w, int64_t K, const float* bias, T* y, int threads) {
  with_k(K, [&](auto k) { forward_k<decltype(k)::value>(x, M, C, w, bias, y, threads); });
}

template <class T>
void wgrad_chunk(const T* gy, const T* x, int64_t m0, int64_t n, int64_t K, int64_t C, float* acc) {
  with_k(K, [&](auto k) { wgrad_k<decltype(k)::value>(gy + m0 * K, x + m0 * C, n, C, acc); });
}

#else  // no AVX2: the callers take their other paths

bool forward_fits(int64_t, int64_t) { return false; }
bool wgrad_fits(int64_t, int64_t) { return false; }
template <class T>
void forward(const T*, int64_t, int64_t, const float*, int64_t, const float*, T*, int) {}
template <class T>
void wgrad_chunk(const T*, const T*, int64_t, int64_t, int64_t, int64_t, float*) {}

#endif

template void forward<half>(const half*, int64_t, int64_t, const float*, int64_t, const float*, half*, int);
template void forward<bfloat16>(const bfloat16*, int64_t, int64_t, const float*, int64_t, const float*, bfloat16*,
                                int);
template void wgrad_chunk<float>(const float*, const float*, int64_t, int64_t, int64_t, int64_t, float*);
template void wgrad_chunk<half>(const half*, const half*, int64_t, int64_t, int64_t, int64_t, float*);
template void wgrad_chunk<bfloat16>(const bfloat16*, const bfloat16*, int64_t, int64_t, int64_t, int64_t, float*);

}  // namespace hg::cpu::pointwise
