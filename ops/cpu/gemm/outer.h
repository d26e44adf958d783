// The engine's second driver, for products with a small result and a long reduction (a
// convolution's weight gradient: C[Kg x RSCg] = sum over pixels of gy[pixel]^T x
// taps[pixel], tens to hundreds of rows and columns, thousands of pixels). Both operands
// are packed k-major by their sources' `pack` (for each pixel, a run of filters and a run
// of taps, as they lie in memory: nothing is transposed) and multiplied by an outer-product
// micro-kernel (kernel.h's OuterKernel). Each element's sum runs over k in order in one
// column tile, so the result does not depend on the thread count.
#pragma once
#include <algorithm>
#include <cstdint>

#include "ops/cpu/gemm/sources.h"

namespace hg::cpu::gemm {

// Pixels per packed block and columns per block: a B block of 64 pixels x 512 taps (128 KiB
// of f32) is written once and read while it is still in L2, one B panel of NR x 64 stays in
// L1 while every A panel passes it. Measured on Zen 3 (bench/conv_wgrad, one thread): 64 x
// 512 beat 256 x 256 by 10-25% on every 3x3 layer; the pack's stores, scattered over the
// block's panels, were what a larger block cost.
constexpr int64_t kOuterKC = 64, kOuterNC = 512;

// A source whose k-th column is a contiguous run of rows (a convolution's output gradient:
// at each pixel the group's filters lie side by side), packed pixel by pixel into k-major
// panels of R rows (what Matrix::pack does panel by panel, here in one pass per pixel).
template <class T>
struct ColumnRuns {
  using Elem = T;
  using Acc = compute_t<T>;
  const T* p;
  int64_t ks;  // elements from one column to the next

  void pack(Acc* dst, int64_t r0, int64_t rn, int64_t k0, int64_t kc, int64_t R) const {
    const int64_t full = rn / R, rest = rn % R;
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = p + (k0 + k) * ks + r0;
      Acc* d = dst + k * R;
      if (R == 4)
        for (int64_t q = 0; q < full; ++q) widen(src + 4 * q, d + q * 4 * kc, 4);
      else if (R == 8)
        for (int64_t q = 0; q < full; ++q) widen(src + 8 * q, d + q * 8 * kc, 8);
      else
        for (int64_t q = 0; q < full; ++q) widen(src + R * q, d + q * R * kc, R);
      if (rest) {
        widen(src + full * R, d + full * R * kc, rest);
        std::fill_n(d + full * R * kc + rest, R - rest, Acc(0));
      }
    }
  }
};

// c[M x N] (row stride ldc) = sum over k < K of a(:, k) b(:, k)^T, overwritten. a and b
// are sources of M and N rows (engine sources: `pack` gives k-major panels); the columns
// are split among `threads` in whole register tiles.
template <class Acc, class SA, class SB>
void run_outer(int64_t M, int64_t N, int64_t K, const SA& a, const SB& b, Acc* c, int64_t ldc, int threads,
               const OuterKernel<Acc>& kn) {
  if (M <= 0 || N <= 0) return;
  const int64_t MR = kn.mr, NR = kn.nr, mp = ceil_div(M, MR);
  const int64_t col_tiles = ceil_div(N, NR);
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(threads, col_tiles));
  parallel_static(static_cast<int>(nt), nt, [&](int64_t t) {
    const int64_t t0 = col_tiles * t / nt * NR, t1 = std::min(N, col_tiles * (t + 1) / nt * NR);
    Workspace<Acc>& ws = Workspace<Acc>::mine();
    Acc* pa = grown(ws.a, mp * MR * kOuterKC);
    Acc* pb = grown(ws.b, ceil_div(kOuterNC, NR) * NR * kOuterKC);
    Acc* pc = grown(ws.c, mp * MR * ceil_div(kOuterNC, NR) * NR);
    for (int64_t n0 = t0; n0 < t1; n0 += kOuterNC) {
      const int64_t nn = std::min(kOuterNC, t1 - n0), np = ceil_div(nn, NR), ldt = np * NR;
      if (K == 0) std::fill_n(pc, mp * MR * ldt, Acc(0));
      for (int64_t k0 = 0; k0 < K; k0 += kOuterKC) {
        const int64_t kc = std::min(kOuterKC, K - k0);
        a.pack(pa, 0, M, k0, kc, MR);
        b.pack(pb, n0, nn, k0, kc, NR);
        for (int64_t j = 0; j < np; ++j)
          for (int64_t i = 0; i < mp; ++i)
            kn.fn(kc, pa + i * MR * kc, pb + j * NR * kc, pc + i * MR * ldt + j * NR, ldt, k0 == 0);
      }
      for (int64_t m = 0; m < M; ++m) std::copy_n(pc + m * ldt, nn, c + m * ldc + n0);
    }
  });
}

}  // namespace hg::cpu::gemm
