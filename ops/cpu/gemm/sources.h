// Operand sources of the CPU GEMM engine: each packs a block of its rows x K into
// k-major micro-panels of R rows, widening f16/bf16 to f32 exactly as it goes. Matrix is
// a strided (or offset-table) matrix; ConvRows/ConvTaps read a convolution's receptive
// fields straight from an NHWC image (implicit im2col: no column buffer).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "framework/half_convert.h"
#include "ops/cpu/gemm/engine.h"

namespace hg::cpu::gemm {

// Exact widening of a contiguous run into the accumulation type.
template <class T, class Acc = compute_t<T>>
inline void widen(const T* src, Acc* dst, int64_t n) {
  if constexpr (std::is_same_v<T, Acc>) {
    if (n <= 32) {  // a conv tap's channels: inline copies of fixed size, no call and no
      // loop over single elements (gcc turns one into a memmove call or rep movs)
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) std::memcpy(dst + i, src + i, 8 * sizeof(Acc));
      if (n - i >= 4) std::memcpy(dst + i, src + i, 4 * sizeof(Acc)), i += 4;
      if (n - i >= 2) std::memcpy(dst + i, src + i, 2 * sizeof(Acc)), i += 2;
      if (n - i >= 1) dst[i] = src[i];
    } else
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(Acc));
  } else {
    if (n < 8) {  // too short for a vector conversion call to pay off
      for (int64_t i = 0; i < n; ++i) dst[i] = load(src[i]);
    } else if constexpr (std::is_same_v<T, half>) {
      convert_f16_to_f32(src, dst, static_cast<size_t>(n));
    } else {
      convert_bf16_to_f32(src, dst, static_cast<size_t>(n));
    }
  }
}

// Zeros rows [rows, R) of a k-major panel of kc columns.
template <class Acc>
inline void zero_rows(Acc* panel, int64_t rows, int64_t R, int64_t kc) {
  if (rows == R) return;
  for (int64_t k = 0; k < kc; ++k) std::fill(panel + k * R + rows, panel + k * R + R, Acc(0));
}

// Writes row i of a panel from a contiguous run of kc values.
template <class Acc>
inline void scatter_row(const Acc* row, Acc* panel, int64_t i, int64_t R, int64_t kc) {
  for (int64_t k = 0; k < kc; ++k) panel[k * R + i] = row[k];
}

// Element (i, k) = p[i*rs + k*ks], or p[i*rs + koff[k]] when an offset table is given.
template <class T>
struct Matrix {
  using Elem = T;
  using Acc = compute_t<T>;
  const T* p;
  int64_t rs, ks = 1;
  const int64_t* koff = nullptr;

  int64_t at_k(int64_t k) const { return koff ? koff[k] : k * ks; }

  void pack(Acc* dst, int64_t r0, int64_t rn, int64_t k0, int64_t kc, int64_t R) const {
    Acc row[KC];
    for (int64_t p0 = 0; p0 < rn; p0 += R, dst += R * kc) {
      const int64_t rows = std::min(R, rn - p0);
      const T* base = p + (r0 + p0) * rs;
      if (rs == 1) {  // a panel's rows are contiguous at each k
        for (int64_t k = 0; k < kc; ++k) widen(base + at_k(k0 + k), dst + k * R, rows);
      } else if (!koff && ks == 1) {  // each row is contiguous along k
        for (int64_t i = 0; i < rows; ++i) {
          widen(base + i * rs + k0, row, kc);
          scatter_row(row, dst, i, R, kc);
        }
      } else {
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t i = 0; i < rows; ++i) dst[k * R + i] = load(base[i * rs + at_k(k0 + k)]);
      }
      zero_rows(dst, rows, R, kc);
    }
  }

  void pack_rows(Acc* dst, int64_t r0, int64_t rn, int64_t k0, int64_t kc, int64_t R) const {
    for (int64_t p0 = 0; p0 < rn; p0 += R, dst += R * kc) {
      const int64_t rows = std::min(R, rn - p0);
      const T* base = p + (r0 + p0) * rs;
      if (!koff && ks == 1) {
        for (int64_t i = 0; i < rows; ++i) widen(base + i * rs + k0, dst + i * kc, kc);
      } else if (rs == 1) {  // the panel's rows are contiguous at each k: widen, then transpose
        Acc col[kMaxR];
        for (int64_t k = 0; k < kc; ++k) {
          widen(base + at_k(k0 + k), col, rows);
          for (int64_t i = 0; i < rows; ++i) dst[i * kc + k] = col[i];
        }
      } else {
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t k = 0; k < kc; ++k) dst[i * kc + k] = load(base[i * rs + at_k(k0 + k)]);
      }
      std::fill(dst + rows * kc, dst + R * kc, Acc(0));
    }
  }
};

// The receptive fields of a convolution over an NHWC image [*, H, W, C]. A pixel index m
// = (z*I + i)*J + j (plus m_base) reads image z at rows u = i*mi + oi + r*di and columns
// v = j*mj + oj + s*dj for tap t = (r*S + s)*Cg + c, channel c0 + c; outside is zero.
// Forward: (mi, oi, di) = (stride, -padding, dilation). Input gradient: the same walk
// backwards over the output gradient (see conv2d_cpu.cpp).
template <class T>
struct ConvGeometry {
  using Elem = T;
  using Acc = compute_t<T>;
  const T* x;
  int64_t H, W, C, c0, Cg, R, S, I, J;
  int64_t mi, oi, di, mj, oj, dj;
  int64_t m_base = 0;

  // A pixel: its image's base pointer and its un-tapped row u and column v.
  struct Pixel {
    int64_t z, i, j;
  };
  Pixel pixel(int64_t m) const {
    m += m_base;
    return {m / (I * J), (m / J) % I, m % J};
  }
  void next(Pixel& p) const {
    if (++p.j == J) p.j = 0, ++p.i == I ? (p.i = 0, ++p.z) : 0;
  }

  // A tap's kernel row, column and channel.
  struct Tap {
    int64_t r, s, c;
  };
  Tap tap(int64_t t) const { return {t / (S * Cg), (t % (S * Cg)) / Cg, t % Cg}; }

  // Walks taps [t, end) (t at `at`) of pixel p in runs of contiguous memory (or of zeros),
  // calling f(src or nullptr, offset from t, length). A run is a tap's channels, or a whole
  // kernel row's when channels and columns are contiguous and in the image.
  template <class F>
  void runs(const Pixel& p, Tap at, int64_t t, int64_t end, F&& f) const {
    const T* img = x + p.z * H * W * C + c0;
    const int64_t u = p.i * mi + oi, v = p.j * mj + oj, SC = S * Cg, first = t;
    const bool row_in = dj == 1 && C == Cg && v >= 0 && v + S - 1 < W;
    auto [r, s, c] = at;
    while (t < end) {
      const int64_t uu = u + r * di, vv = v + s * dj;
      int64_t len;
      const T* src = nullptr;
      if (uu < 0 || uu >= H) {
        len = SC - s * Cg - c;  // the rest of this kernel row
      } else if (row_in) {
        len = SC - s * Cg - c;
        src = img + (uu * W + vv) * C + c;
      } else {
        len = Cg - c;
        if (vv >= 0 && vv < W) src = img + (uu * W + vv) * C + c;
      }
      len = std::min(len, end - t);
      f(src, t - first, len);
      t += len;
      c += len;
      while (c >= Cg && t < end) c -= Cg, ++s;
      while (s >= S) s -= S, ++r;
    }
  }
};

// Fills dst[0, len) from a run: the widened values, or zeros where src is null.
template <class T, class Acc>
inline void fill_run(const T* src, Acc* dst, int64_t len) {
  if (src)
    widen(src, dst, len);
  else
    std::fill_n(dst, len, Acc(0));
}

// Rows are pixels, k runs over taps (forward A, input-gradient A).
template <class T>
struct ConvRows : ConvGeometry<T> {
  using Acc = compute_t<T>;
  void pack_rows(Acc* dst, int64_t r0, int64_t rn, int64_t k0, int64_t kc, int64_t R) const {
    const auto at = this->tap(k0);
    auto px = this->pixel(r0);
    for (int64_t p0 = 0; p0 < rn; p0 += R, dst += R * kc) {
      const int64_t rows = std::min(R, rn - p0);
      for (int64_t i = 0; i < rows; ++i, this->next(px)) {
        Acc* row = dst + i * kc;
        this->runs(px, at, k0, k0 + kc, [&](const T* src, int64_t off, int64_t len) { fill_run(src, row + off, len); });
      }
      std::fill(dst + rows * kc, dst + R * kc, Acc(0));
    }
  }
};

#if defined(__AVX2__)
// dst[j * ld_dst + k] = src[k * ld_src + j] for an 8 x 8 block of f32.
inline void transpose8(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * ld_src);
  for (int k = 0; k < 8; k += 2) t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]), t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  for (int k = 0; k < 8; k += 4)
    for (int h = 0; h < 2; ++h) {
      r[k + h] = _mm256_shuffle_ps(t[k + h], t[k + h + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[k + h + 2] = _mm256_shuffle_ps(t[k + h], t[k + h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  // r[0..3] hold columns 0,2,1,3 (low lanes) and 4,6,5,7 (high lanes) of rows 0-3; r[4..7] of rows 4-7.
  const int order[4] = {0, 2, 1, 3};
  for (int q = 0; q < 4; ++q) {
    _mm256_storeu_ps(dst + order[q] * ld_dst, _mm256_permute2f128_ps(r[q], r[q + 4], 0x20));
    _mm256_storeu_ps(dst + (order[q] + 4) * ld_dst, _mm256_permute2f128_ps(r[q], r[q + 4], 0x31));
  }
}
#endif

// Rows are taps, k runs over pixels (the im2col matrix transposed: the weight gradient's
// A, or its B^T).
template <class T>
struct ConvTaps : ConvGeometry<T> {
  using Acc = compute_t<T>;
  // A packing line: room for a row block (rn <= MC + kMaxR), its zero padding and the 7
  // values fill_line may write past a run.
  static constexpr int64_t kLine = MC + 2 * kMaxR;

  // fill_run into a line: a short f32 run is copied in whole vectors whose masked-off lanes
  // read nothing and write zeros past the run (the next run, or the line's zero padding,
  // follows), since a masked store is slow on AMD cores.
  static void fill_line(const T* src, Acc* dst, int64_t len) {
#if defined(__AVX2__)
    if constexpr (std::is_same_v<T, float>)
      if (src && len <= 32) {
        alignas(32) static constexpr int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t i = 0; i < len; i += 8) {
          const int64_t m = std::min<int64_t>(8, len - i);
          const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + 8 - m));
          _mm256_storeu_ps(dst + i, _mm256_maskload_ps(src + i, mask));
        }
        return;
      }
#endif
    fill_run(src, dst, len);
  }

  // Packs for the A side (rn <= MC + kMaxR): each pixel's taps are gathered into a line in
  // whole runs; a block of 16 lines is then written row by row, so each panel row receives
  // a whole cache line at once (writing one value per pixel down rows kc apart thrashes L1).
  void pack_rows(Acc* dst, int64_t r0, int64_t rn, int64_t k0, int64_t kc, int64_t R) const {
    constexpr int64_t kB = 16;  // pixels per block: one 64-byte line of f32
    const int64_t rows = (rn + R - 1) / R * R;
    Acc lines[kB][kLine];
    for (auto& l : lines) std::fill(l + rn, l + rows, Acc(0));
    const auto at = this->tap(r0);
    auto px = this->pixel(k0);
    for (int64_t b0 = 0; b0 < kc; b0 += kB) {
      const int64_t bn = std::min(kB, kc - b0);
      for (int64_t k = 0; k < bn; ++k, this->next(px))
        this->runs(px, at, r0, r0 + rn, [&](const T* src, int64_t q, int64_t len) { fill_line(src, lines[k] + q, len); });
      int64_t i = 0;
#if defined(__AVX2__)
      if constexpr (std::is_same_v<Acc, float>)
        if (bn == kB)
          for (; i + 8 <= rows; i += 8) {
            transpose8(&lines[0][i], kLine, dst + i * kc + b0, kc);
            transpose8(&lines[8][i], kLine, dst + i * kc + b0 + 8, kc);
          }
#endif
      for (; i < rows; ++i) {
        Acc* out = dst + i * kc + b0;
        for (int64_t k = 0; k < bn; ++k) out[k] = lines[k][i];
      }
    }
  }

  // Packs for the B side only (rn <= NC): each pixel's taps are gathered into a contiguous
  // line in whole runs (kernel rows where possible), then copied panel by panel.
  void pack(Acc* dst, int64_t r0, int64_t rn, int64_t k0, int64_t kc, int64_t R) const {
    const int64_t panels = (rn + R - 1) / R;
    Acc line[NC + kMaxR];
    std::fill(line + rn, line + panels * R, Acc(0));
    const auto at = this->tap(r0);
    auto px = this->pixel(k0);
    for (int64_t k = 0; k < kc; ++k, this->next(px)) {
      this->runs(px, at, r0, r0 + rn, [&](const T* src, int64_t q, int64_t len) { fill_run(src, line + q, len); });
      for (int64_t p = 0; p < panels; ++p) std::copy_n(line + p * R, R, dst + p * R * kc + k * R);
    }
  }
};

}  // namespace hg::cpu::gemm
