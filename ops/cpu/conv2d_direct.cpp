// The direct convolution's register tile and its driver (conv2d_direct.h).
#include "ops/cpu/conv2d_direct.h"
#include "ops/cpu/conv2d_direct_avx512.h"
#include "ops/cpu/gemm/outer_avx2.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "framework/error.h"
#include "ops/cpu/loops.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include "framework/half_convert_x86.h"
#define HG_DIRECT_AVX2 1
#endif

namespace hg::cpu::direct {
namespace {

// c[NP x F] (F = 8 NV) = (first ? 0 : c) + sum over taps t (in order) of px[i * stride + off[t]]
// * w[t * F + j]: output pixel i < NP, filter j < F. CS is the pixel stride when known at
// compile time (0: `stride`).
template <int NP, int NV, int CS>
void tile(int64_t T, const float* px, int64_t stride, const int64_t* off, const float* w, float* c, bool first) {
  constexpr int F = 8 * NV;
  const int64_t cs = CS ? CS : stride;
#ifdef HG_DIRECT_AVX2
  __m256 acc[NP][NV];
#pragma GCC unroll 12
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + i * F + 8 * v);
  for (int64_t t = 0; t < T; ++t) {
    __m256 wv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) wv[v] = _mm256_loadu_ps(w + t * F + 8 * v);
    const float* x = px + off[t];
#pragma GCC unroll 12
    for (int i = 0; i < NP; ++i) {
      const __m256 xi = _mm256_broadcast_ss(x + i * cs);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(xi, wv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(c + i * F + 8 * v, acc[i][v]);
#else
  float acc[NP][F] = {};
  if (!first)
    for (int64_t i = 0; i < NP; ++i)
      for (int64_t j = 0; j < F; ++j) acc[i][j] = c[i * F + j];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < NP; ++i)
      for (int64_t j = 0; j < F; ++j) acc[i][j] = std::fma(px[i * cs + off[t]], w[t * F + j], acc[i][j]);
  for (int64_t i = 0; i < NP; ++i)
    for (int64_t j = 0; j < F; ++j) c[i * F + j] = acc[i][j];
#endif
}

using TileFn = void (*)(int64_t, const float*, int64_t, const int64_t*, const float*, float*, bool);

// The tile of NP pixels by 8 NV filters for a pixel stride.
template <int NP, int NV>
TileFn tile_for(int64_t stride) {
  switch (stride) {
    case 1: return tile<NP, NV, 1>;
    case 8: return tile<NP, NV, 8>;
    case 16: return tile<NP, NV, 16>;
    default: return tile<NP, NV, 0>;
  }
}

// acc[i * F + f] (i < NT taps, f < F = 8 NV filters) += x[i] * g[f] for each of n pixels in
// order, x advancing by xs and g by gs per pixel; first: acc starts at zero. The outer-product
// tile of the weight-gradient driver, with the image and gy as its panels.
template <int NT, int NV>
void wgrad_tile(int64_t n, const float* x, int64_t xs, const float* g, int64_t gs, float* acc, bool first) {
  gemm::outer_avx2<NT, NV>(n, x, xs, g, gs, acc, 8 * NV, first);
}

using WgradFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, bool);

template <int NV, int... NT>
constexpr std::array<WgradFn, sizeof...(NT)> wgrad_tiles(std::integer_sequence<int, NT...>) {
  return {wgrad_tile<NT + 1, NV>...};
}

// The tiles of 1 to 12 taps by 8 filters and of 1 to 6 taps by 16 (12 accumulators at most):
// a kernel row's last few taps take the one that fits.
constexpr std::array<WgradFn, 12> kWgradTiles8 = wgrad_tiles<1>(std::make_integer_sequence<int, 12>{});
constexpr std::array<WgradFn, 6> kWgradTiles16 = wgrad_tiles<2>(std::make_integer_sequence<int, 6>{});

// Stores a tile of np output pixels (consecutive columns of one output row, `sj` elements
// apart) by its nf real filters (of W = 8 or 16 computed) through the epilogue, inline: the
// operations of gemm::store_tile's row store (alpha * c, + bias, ReLU, one rounding), value
// by value, without its call per pixel, which cost more than a few-tap tile's arithmetic
// (the first layer's 9 taps; the head's 16). A last vector of fewer than 8 filters (a head's
// classes) reads the bias masked and writes only its real values.
template <class T>
void store_pixels(const float* c, int64_t np, int64_t W, int64_t nf, T* dst, int64_t sj,
                  const gemm::Epilogue<float>& ep, const float* bias) {
#ifdef HG_DIRECT_AVX2
  const __m256 alpha = _mm256_set1_ps(ep.alpha), zero = _mm256_setzero_ps();
  const int64_t full = nf / 8 * 8, rest = nf - full;
  const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rest)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  auto value = [&](const float* cv, const float* bv, bool masked) {
    __m256 x = _mm256_mul_ps(alpha, _mm256_loadu_ps(cv));
    if (bv) x = _mm256_add_ps(x, masked ? _mm256_maskload_ps(bv, live) : _mm256_loadu_ps(bv));
    if (ep.relu) x = _mm256_blendv_ps(x, zero, _mm256_cmp_ps(x, zero, _CMP_LT_OQ));  // NaN stays NaN
    return x;
  };
  for (int64_t i = 0; i < np; ++i, c += W, dst += sj) {
    for (int64_t v = 0; v < full; v += 8) x86::store8(dst + v, value(c + v, bias ? bias + v : nullptr, false));
    if (rest) {
      const __m256 x = value(c + full, bias ? bias + full : nullptr, true);
      if constexpr (std::is_same_v<T, float>) {
        _mm256_maskstore_ps(dst + full, live, x);
      } else {
        T out[8];
        x86::store8(out, x);
        std::memcpy(dst + full, out, static_cast<size_t>(rest) * sizeof(T));
      }
    }
  }
#else
  (void)c, (void)np, (void)W, (void)nf, (void)dst, (void)sj, (void)ep, (void)bias;
#endif
}

// --- One or two filters (an input gradient into the image's one channel): pixels in lanes.
// With F < 8 filters in a vector of 8, 8 - F lanes would multiply zeros. Here a vector holds
// 8 consecutive output pixels of one filter instead, read from the planar padded image
// ([N * Hp][C][Wp]: a channel's row is contiguous; the caller pads it so, see planar_layout),
// so each tap is one load per 8 pixels and one broadcast weight per filter. Each output is
// still the same chain of fused multiply-adds over the taps in order: the engine's bits.

constexpr int64_t kPlanarMaxFilters = 2, kPlanarVectors = 12;  // 12 accumulators at most

// c[f * 8 NV + 8 v + i] = sum over taps t (in order) of x[off[t] + 8 v + i] * w[t * F + f]:
// 8 NV pixels by F filters (filter-major), the pixels consecutive in each tap's planar row.
template <int NV, int F>
void planar_tile(int64_t T, const float* x, const int64_t* off, const float* w, float* c) {
#ifdef HG_DIRECT_AVX2
  __m256 acc[NV][F];
#pragma GCC unroll 12
  for (int v = 0; v < NV; ++v)
#pragma GCC unroll 2
    for (int f = 0; f < F; ++f) acc[v][f] = _mm256_setzero_ps();
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + off[t];
    __m256 wf[F];
#pragma GCC unroll 2
    for (int f = 0; f < F; ++f) wf[f] = _mm256_broadcast_ss(w + t * F + f);
#pragma GCC unroll 12
    for (int v = 0; v < NV; ++v) {
      const __m256 xv = _mm256_loadu_ps(xt + 8 * v);
#pragma GCC unroll 2
      for (int f = 0; f < F; ++f) acc[v][f] = _mm256_fmadd_ps(xv, wf[f], acc[v][f]);
    }
  }
#pragma GCC unroll 12
  for (int v = 0; v < NV; ++v)
#pragma GCC unroll 2
    for (int f = 0; f < F; ++f) _mm256_storeu_ps(c + f * 8 * NV + 8 * v, acc[v][f]);
#else
  for (int64_t i = 0; i < 8 * NV; ++i)
    for (int64_t f = 0; f < F; ++f) {
      float a = 0;
      for (int64_t t = 0; t < T; ++t) a = std::fma(x[off[t] + i], w[t * F + f], a);
      c[f * 8 * NV + i] = a;
    }
#endif
}

using PlanarFn = void (*)(int64_t, const float*, const int64_t*, const float*, float*);

template <int F, int... V>
constexpr std::array<PlanarFn, sizeof...(V)> planar_tiles(std::integer_sequence<int, V...>) {
  return {planar_tile<V + 1, F>...};
}

// Tiles of 1 to 12 pixel vectors for one filter, 1 to 6 for two.
constexpr std::array<PlanarFn, 12> kPlanarTiles1 = planar_tiles<1>(std::make_integer_sequence<int, 12>{});
constexpr std::array<PlanarFn, 6> kPlanarTiles2 = planar_tiles<2>(std::make_integer_sequence<int, 6>{});

// Whether store_pixels serves this store: a contiguous f32, f16 or bf16 row of filters
// (else gemm::store_tile does it).
bool inline_store(const gemm::Output& out) {
#ifdef HG_DIRECT_AVX2
  return out.sn == 1 && (out.dtype == DType::f32 || out.dtype == DType::f16 || out.dtype == DType::bf16);
#else
  (void)out;
  return false;
#endif
}

}  // namespace

// dst[c * dst_stride + w] = src[w * C + c]: blocks of 8 pixels by 8 channels through an
// 8 x 8 register transpose, the edges value by value.
template <class T>
void transpose_pixels(const T* src, int64_t n, int64_t C, float* dst, int64_t dst_stride) {
  int64_t w0 = 0;
#ifdef HG_DIRECT_AVX2
  for (; w0 + 8 <= n; w0 += 8) {
    int64_t c0 = 0;
    for (; c0 + 8 <= C; c0 += 8) {
      __m256 r[8], t[8], u[8];
      for (int i = 0; i < 8; ++i) r[i] = x86::load8(src + (w0 + i) * C + c0);
      for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
      }
      for (int j = 0; j < 4; ++j) {
        _mm256_storeu_ps(dst + (c0 + j) * dst_stride + w0, _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
        _mm256_storeu_ps(dst + (c0 + j + 4) * dst_stride + w0, _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
      }
    }
    for (; c0 < C; ++c0)
      for (int64_t w = w0; w < w0 + 8; ++w) dst[c0 * dst_stride + w] = load(src[w * C + c0]);
  }
#endif
  for (int64_t w = w0; w < n; ++w)
    for (int64_t c = 0; c < C; ++c) dst[c * dst_stride + w] = load(src[w * C + c]);
}

template void transpose_pixels<float>(const float*, int64_t, int64_t, float*, int64_t);
template void transpose_pixels<half>(const half*, int64_t, int64_t, float*, int64_t);
template void transpose_pixels<bfloat16>(const bfloat16*, int64_t, int64_t, float*, int64_t);

bool planar_layout(int64_t filters, int64_t Q) { return filters <= kPlanarMaxFilters && Q >= 8; }

void wgrad_chunk(const WgradPlan& plan, int64_t m0, int64_t len, float* gw) {
  const Padded& img = *plan.img;
  const int64_t SC = plan.S * img.C, T = plan.R * SC, PQ = plan.P * plan.Q, F = plan.F;
  // On AVX-512, filters a multiple of 16 run in blocks of 16-64 (a zmm per 16 filters, 24
  // accumulators: 24 taps x 16 filters ... 6 taps x 64); else AVX2's 12 x 8 or 6 x 16.
  const bool zmm = F % 16 == 0 && avx512::usable();
  const int64_t vectors = !zmm ? 0 : F % 64 == 0 ? 4 : F % 48 == 0 ? 3 : F % 32 == 0 ? 2 : 1;
  const int64_t block = zmm ? 16 * vectors : F, tile_taps = zmm ? avx512::kMaxTaps / vectors : F == 8 ? 12 : 6;
  HG_CHECK(zmm || F == 8 || F == 16, "direct weight gradient: ", F,
           " filters per tile (8 or 16; multiples of 16 on AVX-512) (internal error)");
  const int64_t xs = plan.sw * img.C, row_step = plan.sh * img.Wp * img.C, row_floats = img.Wp * img.C;
  // Padded row hp of image n: in img.data, or (rows made on demand) in this chunk's buffer,
  // which holds, image after image, the padded rows [lo, hi) that the chunk's pixels reach.
  thread_local std::vector<float> buf;
  thread_local std::vector<int64_t> first_row;  // per image of the chunk: its buffer row minus its lo
  const int64_t n0 = m0 / PQ;
  if (!img.data && len > 0) {
    const int64_t n1 = (m0 + len - 1) / PQ;
    first_row.assign(static_cast<size_t>(n1 - n0 + 1), 0);
    for (int pass = 0; pass < 2; ++pass) {  // sizes, then the rows
      int64_t at = 0;
      for (int64_t n = n0; n <= n1; ++n) {
        const int64_t a = std::max(m0, n * PQ) - n * PQ, b = std::min(m0 + len, (n + 1) * PQ) - n * PQ;
        const int64_t lo = a / plan.Q * plan.sh, hi = (b - 1) / plan.Q * plan.sh + (plan.R - 1) * plan.dh + 1;
        if (pass == 1) {
          img.rows(n, lo, hi - lo, buf.data() + at * row_floats);
          first_row[static_cast<size_t>(n - n0)] = at - lo;
        }
        at += hi - lo;
      }
      if (pass == 0 && static_cast<int64_t>(buf.size()) < at * row_floats) buf.resize(static_cast<size_t>(at * row_floats));
    }
  }
  auto row_at = [&](int64_t n, int64_t hp) {
    return img.data ? img.data + (n * img.Hp + hp) * row_floats
                    : buf.data() + (first_row[static_cast<size_t>(n - n0)] + hp) * row_floats;
  };
  alignas(64) float acc[avx512::kMaxTaps * 16];
  for (int64_t f0 = 0; f0 < F; f0 += block)
    for (int64_t r = 0; r < plan.R; ++r)
      for (int64_t j0 = 0; j0 < SC; j0 += tile_taps) {
        const int64_t nt = std::min(tile_taps, SC - j0);
        // The chunk's pixels in order: a partial row, whole rows of one image together (AVX-512),
        // or (AVX2) a run of one output row at a time.
        bool first = true;
        for (int64_t m = m0; m < m0 + len;) {
          const int64_t n = m / PQ, p = (m / plan.Q) % plan.P, q = m % plan.Q, run = std::min(plan.Q - q, m0 + len - m);
          const float* x = row_at(n, p * plan.sh + r * plan.dh) + q * plan.sw * img.C + j0;
          const float* g = plan.gy + m * plan.gy_stride + f0;
          if (zmm) {
            const int64_t rows = q == 0 ? std::max<int64_t>(1, std::min(plan.P - p, (m0 + len - m) / plan.Q)) : 1;
            const int64_t n_row = rows > 1 ? plan.Q : run;
            avx512::wgrad(vectors, nt)(rows, n_row, x, xs, row_step, g, plan.gy_stride, acc, first);
            m += rows * n_row;
          } else {
            const WgradFn fn = F == 8 ? kWgradTiles8[static_cast<size_t>(nt - 1)] : kWgradTiles16[static_cast<size_t>(nt - 1)];
            fn(run, x, xs, g, plan.gy_stride, acc, first);
            m += run;
          }
          first = false;
        }
        if (first) std::fill_n(acc, nt * block, 0.0f);  // no pixels: a sum of nothing
        for (int64_t i = 0; i < nt; ++i)
          for (int64_t f = f0; f < std::min(f0 + block, plan.filters); ++f)
            gw[f * T + r * SC + j0 + i] = acc[i * block + f - f0];
      }
}

bool avx512_usable() { return avx512::usable(); }

bool wgrad_tiles_for(int64_t filters) {
  return filters <= 8 || filters == 16 || (filters % 16 == 0 && avx512::usable());
}

void pack_weights(Plan& plan, const float* wt, int64_t F, int64_t T) {
  plan.F = F;
  // On AVX-512 a tile takes 32 filters (filters a multiple of 32), else 16 or 8.
  plan.width = F % 16 != 0 ? 8 : F % 32 == 0 && avx512::usable() ? 32 : 16;
  const int64_t W = plan.width, blocks = (F + W - 1) / W;
  plan.weights.assign(static_cast<size_t>(blocks * T * W), 0.0f);  // filters past F: zeros
  for (int64_t fb = 0; fb < blocks; ++fb)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < W && fb * W + j < F; ++j)
        plan.weights[static_cast<size_t>((fb * T + t) * W + j)] = wt[(fb * W + j) * T + t];
}

namespace {

// Stores np pixels (a multiple of 8) of F = 1 or 2 filters from the tile's filter-major
// c to consecutive output pixels (dst, F values each), with gemm::store_tile's operations per
// value (alpha * c, + bias, ReLU, one rounding); two filters are interleaved in registers.
template <class T>
void store_planar(const float* c, int64_t np, int64_t F, T* dst, const gemm::Epilogue<float>& ep) {
#ifdef HG_DIRECT_AVX2
  const __m256 alpha = _mm256_set1_ps(ep.alpha), zero = _mm256_setzero_ps();
  const __m256 bias = !ep.bias ? zero : F == 1 ? _mm256_set1_ps(ep.bias[0]) : _mm256_setr_ps(ep.bias[0], ep.bias[1], ep.bias[0], ep.bias[1], ep.bias[0], ep.bias[1], ep.bias[0], ep.bias[1]);
  auto value = [&](__m256 x) {
    x = _mm256_mul_ps(alpha, x);
    if (ep.bias) x = _mm256_add_ps(x, bias);
    if (ep.relu) x = _mm256_blendv_ps(x, zero, _mm256_cmp_ps(x, zero, _CMP_LT_OQ));  // NaN stays NaN
    return x;
  };
  for (int64_t i = 0; i < np; i += 8) {
    if (F == 1) {
      x86::store8(dst + i, value(_mm256_loadu_ps(c + i)));
    } else {
      const __m256 a = _mm256_loadu_ps(c + i), b = _mm256_loadu_ps(c + np + i);
      const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);  // pixels 0,1,4,5 / 2,3,6,7
      x86::store8(dst + 2 * i, value(_mm256_permute2f128_ps(lo, hi, 0x20)));
      x86::store8(dst + 2 * i + 8, value(_mm256_permute2f128_ps(lo, hi, 0x31)));
    }
  }
#else
  (void)c, (void)np, (void)F, (void)dst, (void)ep;
#endif
}

void run_planar(const Plan& plan, const gemm::Output& out, const gemm::Epilogue<float>& ep) {
  const Padded& img = *plan.img;
  HG_CHECK(img.planar || img.C == 1, "direct convolution: a run of ", plan.F,
           " filters reads a planar padded image; pad it with planar_layout() (internal error)");
  // The taps' offsets (r * Wp + s) * C + c in the padded image, as offsets into its planar rows.
  std::vector<int64_t> off(plan.offsets.size());
  for (size_t t = 0; t < off.size(); ++t) {
    const int64_t o = plan.offsets[t], ch = o % img.C, rc = o / img.C;
    off[t] = (rc / img.Wp * img.C + ch) * img.Wp + rc % img.Wp;
  }
  const int64_t T = static_cast<int64_t>(off.size()), F = plan.F, rows = img.N * plan.P;
  std::vector<float> w(static_cast<size_t>(T * F));  // [T][F] from the plan's [T][8] block
  for (int64_t t = 0; t < T; ++t)
    for (int64_t f = 0; f < F; ++f) w[static_cast<size_t>(t * F + f)] = plan.weights[static_cast<size_t>(t * plan.width + f)];
  const int64_t max_v = F == 1 ? kPlanarVectors : kPlanarVectors / 2;
  const int threads = rows * plan.Q * F * T < (int64_t{1} << 18) ? 1 : op_threads();
  parallel_static(threads, rows, [&](int64_t row) {
    const int64_t n = row / plan.P, p = row % plan.P;
    const float* base = img.data + (n * img.Hp + p * plan.sh) * img.Wp * img.C;
    alignas(32) float c[kPlanarVectors * 8], cp[kPlanarVectors * 8];  // filter-major; pixel-major
    for (int64_t q0 = 0; q0 < plan.Q;) {
      // The last pixels: the fewest vectors that hold them (no more than the row holds),
      // ending at the row's end (an overlap computes some pixels again: the same chain,
      // stored again unchanged).
      const int64_t nv = std::min({max_v, (plan.Q - q0 + 7) / 8, plan.Q / 8}), q = std::min(q0, plan.Q - 8 * nv);
      q0 = q + 8 * nv;
      const PlanarFn fn = F == 1 ? kPlanarTiles1[static_cast<size_t>(nv - 1)] : kPlanarTiles2[static_cast<size_t>(nv - 1)];
      fn(T, base + q, off.data(), w.data(), c);
      const int64_t np = 8 * nv;
      if (!inline_store(out) || out.sj != F) {
        for (int64_t i = 0; i < np; ++i)
          for (int64_t f = 0; f < F; ++f) cp[i * F + f] = c[f * np + i];
        gemm::store_tile<float>(cp, F, row * plan.Q + q, np, 0, F, out, ep);
        continue;
      }
      // Pixel (row, q) of the output grid, as store_tile places it: z = row / I, i = row % I.
      const int64_t at = (row / out.I) * out.sz + (row % out.I) * out.si + q * out.sj;
      switch (out.dtype) {
        case DType::f16: store_planar(c, np, F, static_cast<half*>(out.ptr) + at, ep); break;
        case DType::bf16: store_planar(c, np, F, static_cast<bfloat16*>(out.ptr) + at, ep); break;
        default: store_planar(c, np, F, static_cast<float*>(out.ptr) + at, ep); break;
      }
    }
  });
}

}  // namespace

void run(const Plan& plan, const gemm::Output& out, const gemm::Epilogue<float>& ep) {
  if (planar_layout(plan.F, plan.Q)) return run_planar(plan, out, ep);
  const Padded& img = *plan.img;
  const int64_t T = static_cast<int64_t>(plan.offsets.size()), rows = img.N * plan.P, W = plan.width;
  const int64_t blocks = (plan.F + W - 1) / W;
  // Tiles of 4, 8 and 12 pixels by 8 filters, or of 2, 4 and 6 by 16 (12 accumulators at
  // most); on AVX-512 (a width of 16 * vectors), 24 / vectors pixels at most (24 zmm).
  const bool zmm = W % 16 == 0 && avx512::usable(), wide = W == 16;
  const int64_t vectors = W / 16;
  const int64_t step = zmm ? avx512::pixel_step(vectors) : wide ? 2 : 4;
  const int64_t sizes = zmm ? avx512::max_pixels(vectors) / step : 3;
  HG_CHECK(plan.Q >= step, "direct convolution: rows of ", plan.Q, " output pixels; its tiles need at least ", step,
           " (internal error)");
  HG_CHECK(img.data || img.rows, "direct convolution: an image with neither data nor rows (internal error)");
  TileFn fns[avx512::kMaxPixels] = {};
  for (int64_t i = 0; i < sizes; ++i)
    fns[i] = zmm ? avx512::tile(vectors, (i + 1) * step, img.C)
             : i == 0 ? (wide ? tile_for<2, 2>(img.C) : tile_for<4, 1>(img.C))
             : i == 1 ? (wide ? tile_for<4, 2>(img.C) : tile_for<8, 1>(img.C))
                      : (wide ? tile_for<6, 2>(img.C) : tile_for<12, 1>(img.C));
  const int threads = rows * plan.Q * plan.F * T < (int64_t{1} << 18) ? 1 : op_threads();
  // Taps in runs whose weights (one filter block's) stay in L1 across a row's tiles: a row
  // of tiles runs the first run of taps, then the next, each tile carrying on its sums in its
  // slot of `kept` (the same chain), and stores after the last. One run where all taps fit.
  constexpr int64_t kRunBytes = int64_t{24} << 10;
  const int64_t run_taps = std::max<int64_t>(1, kRunBytes / (W * static_cast<int64_t>(sizeof(float))));
  const int64_t runs = (T + run_taps - 1) / run_taps;
  // No tile is longer than the row (Q >= 4 >= step): a tile reads only its row's pixels.
  const int64_t longest = std::min(sizes, plan.Q / step) * step, tiles = (plan.Q + longest - 1) / longest;
  constexpr int64_t tile_floats = avx512::kMaxPixels * 16;
  // Output row `row` (image n = row / P, row p), its padded input rows from p * sh at base.
  auto output_row = [&](int64_t row, const float* base) {
    alignas(64) float one[tile_floats];  // one run: each tile's sums, stored at once
    float* kept = one;                   // several runs: every tile's sums across the row
    if (runs > 1) {
      thread_local std::vector<float> sums;
      if (static_cast<int64_t>(sums.size()) < tiles * tile_floats) sums.resize(static_cast<size_t>(tiles * tile_floats));
      kept = sums.data();
    }
    // The row's tiles: a row's last few pixels take the smallest tile that holds them, ending
    // at the row's end (overlapping the tile before: those pixels' sums are computed again,
    // the same chain, and stored again unchanged).
    auto tile_at = [&](int64_t i, int64_t& q, int64_t& size) {
      const int64_t q0 = i * longest, left = plan.Q - q0;
      size = std::min(longest, (left + step - 1) / step * step);
      q = std::min(q0, plan.Q - size);
    };
    for (int64_t b = 0; b < blocks; ++b) {
      const float* wb = plan.weights.data() + b * T * W;
      for (int64_t u = 0; u + 1 < runs; ++u)  // every run but the last: sums kept per tile
        for (int64_t i = 0; i < tiles; ++i) {
          int64_t q, size;
          tile_at(i, q, size);
          const int64_t t0 = u * run_taps;
          fns[size / step - 1](run_taps, base + q * img.C, img.C, plan.offsets.data() + t0, wb + t0 * W,
                               kept + i * tile_floats, u == 0);
        }
      const int64_t t0 = (runs - 1) * run_taps;
      for (int64_t i = 0; i < tiles; ++i) {
        int64_t q, size;
        tile_at(i, q, size);
        float* c = kept + (runs > 1 ? i * tile_floats : 0);
        fns[size / step - 1](T - t0, base + q * img.C, img.C, plan.offsets.data() + t0, wb + t0 * W, c, runs == 1);
        const int64_t np = std::min(size, plan.Q - q), nf = std::min(W, plan.F - b * W);
        if (!inline_store(out)) {
          gemm::store_tile<float>(c, W, row * plan.Q + q, np, b * W, nf, out, ep);
          continue;
        }
        // Pixel (row, q) of the output grid, as store_tile places it: z = row / I, i = row % I.
        const int64_t at = (row / out.I) * out.sz + (row % out.I) * out.si + q * out.sj + b * W;
        const float* bias = ep.bias ? ep.bias + b * W : nullptr;
        switch (out.dtype) {
          case DType::f16: store_pixels(c, np, W, nf, static_cast<half*>(out.ptr) + at, out.sj, ep, bias); break;
          case DType::bf16: store_pixels(c, np, W, nf, static_cast<bfloat16*>(out.ptr) + at, out.sj, ep, bias); break;
          default: store_pixels(c, np, W, nf, static_cast<float*>(out.ptr) + at, out.sj, ep, bias); break;
        }
      }
    }
  };
  const int64_t row_floats = img.Wp * img.C;
  if (img.data) {
    parallel_static(threads, rows, [&](int64_t row) {
      const int64_t n = row / plan.P, p = row % plan.P;
      output_row(row, img.data + (n * img.Hp + p * plan.sh) * row_floats);
    });
    return;
  }
  // Padded rows made per block of output rows: `span` rows under each output row (its taps'
  // reach), blocks of up to `rows_per_block` output rows whose input fits kBlockBytes (within
  // a core's L2 beside the weights), and at least four blocks per thread where rows allow.
  constexpr int64_t kBlockBytes = int64_t{384} << 10;
  const int64_t span = *std::max_element(plan.offsets.begin(), plan.offsets.end()) / row_floats + 1;
  const int64_t fit = kBlockBytes / (row_floats * static_cast<int64_t>(sizeof(float)));
  int64_t rows_per_block = std::clamp<int64_t>((fit - span) / plan.sh + 1, 1, plan.P);
  while (rows_per_block > 1 && img.N * ((plan.P + rows_per_block - 1) / rows_per_block) < 4 * threads)
    rows_per_block = (rows_per_block + 1) / 2;
  const int64_t per_image = (plan.P + rows_per_block - 1) / rows_per_block;
  parallel_static(threads, img.N * per_image, [&](int64_t blk) {
    const int64_t n = blk / per_image, p0 = blk % per_image * rows_per_block;
    const int64_t p1 = std::min(plan.P, p0 + rows_per_block), first = p0 * plan.sh;
    const int64_t count = (p1 - 1) * plan.sh + span - first;
    thread_local std::vector<float> buf;
    if (static_cast<int64_t>(buf.size()) < count * row_floats) buf.resize(static_cast<size_t>(count * row_floats));
    img.rows(n, first, count, buf.data());
    for (int64_t p = p0; p < p1; ++p) output_row(n * plan.P + p, buf.data() + (p * plan.sh - first) * row_floats);
  });
}

}  // namespace hg::cpu::direct
