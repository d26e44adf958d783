// Operand sources of the CPU GEMM engine: each packs a block of its rows x K into
// k-major micro-panels of R rows, widening f16/bf16 to f32 exactly as it goes. Matrix is
// a strided (or offset-table) matrix; ConvRows/ConvTaps read a convolution's receptive
// fields straight from an NHWC image (implicit im2col: no column buffer), ConvRows as the
// forward's rows, ConvTaps as the weight gradient's k-major columns.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX2__) && defined(__F16C__)
#define HG_SOURCES_X86 1
#include "framework/half_convert_x86.h"
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
#if HG_SOURCES_X86
    // Inline: the runs are often a tap's or a pixel's few channels, where a call per run
    // (and its tail copies) cost more than the conversion. The same conversions as the bulk
    // one (half_convert_x86.h and its scalar twin in half.h/bfloat16.h): identical bits.
    if constexpr (std::is_same_v<Acc, float>) {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, x86::load8(src + i));
      if (i + 4 <= n) _mm_storeu_ps(dst + i, x86::load4(src + i)), i += 4;
      for (; i < n; ++i) dst[i] = load(src[i]);
      return;
    }
#endif
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

// Rows are taps, k runs over pixels (the im2col matrix transposed: the weight gradient's
// columns, packed k-major for the outer-product driver, gemm/outer.h).
template <class T>
struct ConvTaps : ConvGeometry<T> {
  using Acc = compute_t<T>;
  // Packs k-major panels (R values per pixel per panel): each pixel's taps are copied in
  // whole runs (a tap's channels, or a kernel row's) straight to their places in the
  // panels, a run split where it crosses from one panel into the next; the last panel's
  // columns past rn are zeros.
  void pack(Acc* dst, int64_t r0, int64_t rn, int64_t k0, int64_t kc, int64_t R) const {
    const int64_t panels = (rn + R - 1) / R, pad = panels * R - rn, last = (panels - 1) * R * kc + rn % R;
    const auto at = this->tap(r0);
    auto px = this->pixel(k0);
    for (int64_t k = 0; k < kc; ++k, this->next(px)) {
      Acc* col = dst + k * R;
      this->runs(px, at, r0, r0 + rn, [&](const T* src, int64_t q, int64_t len) {
#if HG_SOURCES_X86
        if constexpr (std::is_same_v<Acc, float>)
          if (R % 8 == 0 && (q % 8 | len % 8) == 0) {  // whole vectors, none crossing a panel
            int64_t o = q % R;
            Acc* d = col + (q - o) * kc + o;
            for (int64_t i = 0; i < len; i += 8) {
              _mm256_storeu_ps(d, src ? x86::load8(src + i) : _mm256_setzero_ps());
              d += 8, o += 8;
              if (o == R) o = 0, d += (kc - 1) * R;
            }
            return;
          }
#endif
        while (len > 0) {
          const int64_t o = q % R, n = std::min(len, R - o);
          fill_run(src, col + (q - o) * kc + o, n);
          if (src) src += n;
          q += n, len -= n;
        }
      });
      if (pad) std::fill_n(col + last, pad, Acc(0));
    }
  }
};

}  // namespace hg::cpu::gemm
