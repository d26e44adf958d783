// The CPU GEMM engine: out = epilogue(A · B^T-as-rows) with both operands packed from
// "sources" into micro-panels (f16/bf16 widened exactly at pack time), a register-tile
// micro-kernel, KC/MC/NC cache blocking and one rounding per output element.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "framework/dtype.h"

namespace hg::cpu::gemm {

// The register tile: MR rows of A by NR columns of B (6x16 f32 = 12 AVX2 accumulators).
constexpr int64_t MR = 6, NR = 16;
// K per packed block (B's micro-panel, KC*NR*4 = 16 KiB, stays in L1), rows of A per block
// (MC*KC*4 = 144 KiB in L2) and columns of B per output tile (B block in L2/L3).
constexpr int64_t KC = 256, MC = 144, NC = 512;

// Where element (m, n) of the result goes: row m is pixel (z, i, j) of a grid of I x J
// (m = (z*I + i)*J + j), stored at ptr + z*sz + i*si + j*sj + n*sn elements. A plain
// matrix is I = 1, J = M, sj = its row stride.
struct Output {
  void* ptr = nullptr;
  DType dtype = DType::f32;
  int64_t I = 1, J = 1;
  int64_t sz = 0, si = 0, sj = 0, sn = 1;
};

// The fused epilogue, in f32 (f64 for f64 products): v = alpha*acc, v += bias[n], ReLU,
// then the one rounding into the output dtype (as cuda/mma_gemm.h's Epilogue).
template <class Acc>
struct Epilogue {
  Acc alpha = 1;
  const Acc* bias = nullptr;  // one value per column, or none
  bool relu = false;
};

// c[MR x NR] (row stride ldc) = (first ? 0 : c) + a · b for an A panel of MR rows of kc
// values each (row-major) and a B panel of kc rows of NR values (k-major); each element is
// one sequential chain of fused multiply-adds in k order.
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first);
void micro_kernel(int64_t kc, const double* a, const double* b, double* c, int64_t ldc, bool first);
// The same for a B panel whose columns past NR/2 are padding: only c's first NR/2 columns
// are computed (the rest of the tile is left as it was, and never stored).
void micro_kernel_half(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first);
void micro_kernel_half(int64_t kc, const double* a, const double* b, double* c, int64_t ldc, bool first);

// Writes rows [m0, m0 + mn) x columns [n0, n0 + nn) of the tile c (row stride ldc) through the epilogue.
template <class Acc>
void store_tile(const Acc* c, int64_t ldc, int64_t m0, int64_t mn, int64_t n0, int64_t nn, const Output& out,
                const Epilogue<Acc>& ep);

// Reused per-thread buffers, grown to the largest call and never freed: no allocation on
// the hot path.
template <class Acc>
struct Workspace {
  std::vector<Acc> a, b, c, shared_b;
  static Workspace& mine() {
    thread_local Workspace w;
    return w;
  }
};

template <class Acc>
Acc* grown(std::vector<Acc>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// How many threads a product of this size deserves: 1 inside another parallel region or
// when waking a thread costs more than the work.
inline int threads_for(int64_t M, int64_t N, int64_t K) {
  if (omp_in_parallel()) return 1;
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  return flops < 2.0e6 ? 1 : omp_get_max_threads();
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// out = epilogue(A · B) for A an M x K source and B given as its N x K transpose source.
// Both pack blocks of rows [r0, r0 + rn) x [k0, k0 + kc) into panels of R rows, zero rows
// past rn: A with `pack_rows` (each panel row-major: R rows of kc), B with `pack` (each
// panel k-major: kc groups of R). The output is split into tiles only (rows x columns); every element's
// sum runs over k in order in one tile, so results do not depend on the thread count.
template <class Acc, class SA, class SB>
void run(int64_t M, int64_t N, int64_t K, const SA& a, const SB& b, const Output& out, const Epilogue<Acc>& ep,
         int threads = -1) {
  if (M <= 0 || N <= 0) return;
  if (threads < 0) threads = threads_for(M, N, K);
  int64_t mb = ceil_div(M, MC), nb = ceil_div(N, NC);
  if (mb * nb < threads) {  // too few tiles: split the longer side further
    if (ceil_div(M, MR) >= ceil_div(N, NR))
      mb = std::min<int64_t>(ceil_div(M, MR), threads);
    else
      nb = std::min<int64_t>(ceil_div(N, NR), threads);
  }
  const int64_t mc = ceil_div(ceil_div(M, mb), MR) * MR, nc = ceil_div(ceil_div(N, nb), NR) * NR;
  mb = ceil_div(M, mc), nb = ceil_div(N, nc);
  const int64_t tiles = mb * nb, kblocks = ceil_div(K, KC), block_b = ceil_div(nc, NR) * NR * KC;
  const int nt = static_cast<int>(std::min<int64_t>(threads, tiles));
  // When several row tiles would pack the same B blocks, B is packed once up front (all of
  // it, bounded to ~16 MiB) and shared; else each tile packs its own.
  const bool shared = mb > 1 && nb * kblocks * block_b * static_cast<int64_t>(sizeof(Acc)) <= (int64_t{16} << 20);
  Acc* sb = shared ? grown(Workspace<Acc>::mine().shared_b, nb * kblocks * block_b) : nullptr;
  if (shared) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (int64_t i = 0; i < nb * kblocks; ++i) {
      const int64_t n0 = (i / kblocks) * nc, k0 = (i % kblocks) * KC;
      b.pack(sb + i * block_b, n0, std::min(nc, N - n0), k0, std::min(KC, K - k0), NR);
    }
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t m0 = (t / nb) * mc, n0 = (t % nb) * nc;
    const int64_t mn = std::min(mc, M - m0), nn = std::min(nc, N - n0);
    const int64_t mp = ceil_div(mn, MR), np = ceil_div(nn, NR), ldc = np * NR;
    Workspace<Acc>& ws = Workspace<Acc>::mine();
    Acc* pa = grown(ws.a, mp * MR * KC);
    Acc* pb = shared ? nullptr : grown(ws.b, np * NR * KC);
    Acc* pc = grown(ws.c, mp * MR * ldc);
    if (K == 0) std::fill_n(pc, mp * MR * ldc, Acc(0));
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      const int64_t kc = std::min(KC, K - k0);
      if (shared)
        pb = sb + ((t % nb) * kblocks + k0 / KC) * block_b;
      else
        b.pack(pb, n0, nn, k0, kc, NR);
      a.pack_rows(pa, m0, mn, k0, kc, MR);
      for (int64_t j = 0; j < np; ++j) {
        const bool half = nn - j * NR <= NR / 2;
        for (int64_t i = 0; i < mp; ++i)
          if (half)
            micro_kernel_half(kc, pa + i * MR * kc, pb + j * NR * kc, pc + i * MR * ldc + j * NR, ldc, k0 == 0);
          else
            micro_kernel(kc, pa + i * MR * kc, pb + j * NR * kc, pc + i * MR * ldc + j * NR, ldc, k0 == 0);
      }
    }
    store_tile(pc, ldc, m0, mn, n0, nn, out, ep);
  }
}

}  // namespace hg::cpu::gemm
