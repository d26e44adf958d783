// The CPU GEMM engine: out = epilogue(A · B^T-as-rows) with both operands packed from
// "sources" into micro-panels (f16/bf16 widened exactly at pack time), a register-tile
// micro-kernel, KC/MC/NC cache blocking and one rounding per output element.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "framework/dtype.h"
#include "ops/cpu/aligned.h"
#include "ops/cpu/gemm/kernel.h"
#include "ops/cpu/loops.h"

namespace hg::cpu::gemm {

// K per packed block (a B micro-panel of KC x NR f32 stays in L1), rows of A per block
// (MC x KC f32 = 144 KiB in L2) and columns of B per output tile (B block in L2/L3). The
// register tile (MR x NR) is the chosen kernel's (kernel.h).
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

// Writes rows [m0, m0 + mn) x columns [n0, n0 + nn) of the tile c (row stride ldc) through the epilogue.
template <class Acc>
void store_tile(const Acc* c, int64_t ldc, int64_t m0, int64_t mn, int64_t n0, int64_t nn, const Output& out,
                const Epilogue<Acc>& ep);

// Reused per-thread buffers, grown to the largest call and never freed: no allocation on
// the hot path.
template <class Acc>
struct Workspace {
  std::vector<Acc> a, b, c, shared_b;
  aligned_vector<unsigned char> native_a, native_b, shared_native_b;  // a kernel's own layout (AMX tiles: aligned)
  std::vector<char> ok_a, ok_b, shared_ok_b;  // per panel: the kernel computes it exactly
  std::vector<char> on_exact;                  // per register tile: moved to the exact chain
  static Workspace& mine() {
    thread_local Workspace w;
    return w;
  }
};

template <class V>
typename V::value_type* grown(V& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// How many threads a product of this size deserves: 1 inside another parallel region or
// when waking a thread costs more than the work.
inline int threads_for(int64_t M, int64_t N, int64_t K) {
  if (in_parallel()) return 1;
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  return flops < 2.0e6 ? 1 : num_threads();
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The operand format of a pair of sources (their element type; conv sources of widened
// activations read as f32).
template <class SA, class SB>
constexpr Operands operands_of() {
  using A = typename SA::Elem;
  using B = typename SB::Elem;
  if constexpr (std::is_same_v<A, half> && std::is_same_v<B, half>) return Operands::f16;
  if constexpr (std::is_same_v<A, bfloat16> && std::is_same_v<B, bfloat16>) return Operands::bf16;
  return Operands::f32;
}

// The kernel for operands whose values are all of type T, also where a source holds them
// widened to f32 (a convolution's activations).
template <class T>
const Kernel<compute_t<T>>& kernel_for_values(int64_t n = 0) {
  if constexpr (std::is_same_v<T, double>)
    return kernel_for_f64();
  else
    return kernel_for(std::is_same_v<T, half>       ? Operands::f16
                      : std::is_same_v<T, bfloat16> ? Operands::bf16
                                                    : Operands::f32,
                      n);
}

template <class Acc, class SA, class SB>
const Kernel<Acc>& default_kernel(int64_t n) {
  if constexpr (std::is_same_v<Acc, double>)
    return kernel_for_f64();
  else
    return kernel_for(operands_of<SA, SB>(), n);
}

// Converts np packed f32 panels of r rows (stride r*kc) into the kernel's layout (stride
// bytes each), recording per panel whether the kernel computes it exactly.
template <class Acc>
void repack_panels(bool (*convert)(const Acc*, int64_t, void*), const Acc* f32, int64_t np, int64_t r, int64_t kc,
                   unsigned char* dst, int64_t bytes, char* ok) {
  for (int64_t p = 0; p < np; ++p) ok[p] = convert(f32 + p * r * kc, kc, dst + p * bytes);
}

// out = epilogue(A · B) for A an M x K source and B given as its N x K transpose source,
// with `kernel` (default: the current path's for these operands).
// Both pack blocks of rows [r0, r0 + rn) x [k0, k0 + kc) into panels of R rows, zero rows
// past rn: A with `pack_rows` (each panel row-major: R rows of kc), B with `pack` (each
// panel k-major: kc groups of R); a kernel with its own layout then converts each panel.
// The output is split into tiles only (rows x columns); every element's sum runs over k in
// order in one tile, so results do not depend on the thread count.
template <class Acc, class SA, class SB>
void run(int64_t M, int64_t N, int64_t K, const SA& a, const SB& b, const Output& out, const Epilogue<Acc>& ep,
         int threads = -1, const Kernel<Acc>* kernel = nullptr) {
  if (M <= 0 || N <= 0) return;
  const Kernel<Acc>& kn = kernel ? *kernel : default_kernel<Acc, SA, SB>(N);
  const int64_t MR = kn.mr, NR = kn.nr, KB = kn.kc > 0 ? std::min(kn.kc, KC) : KC;  // K per block
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
  const int64_t tiles = mb * nb, kblocks = ceil_div(K, KB), block_b = ceil_div(nc, NR) * NR * KB;
  const int nt = static_cast<int>(std::min<int64_t>(threads, tiles));
  const bool native = kn.repack_a != nullptr;
  const int64_t bytes_a = native ? kn.panel_bytes(KB, MR) : 0, bytes_b = native ? kn.panel_bytes(KB, NR) : 0;
  const int64_t panels_b = ceil_div(nc, NR);  // B panels per block
  // When several row tiles would pack the same B blocks, B is packed once up front (all of
  // it, bounded to ~16 MiB) and shared; else each tile packs its own.
  const bool shared = mb > 1 && nb * kblocks * block_b * static_cast<int64_t>(sizeof(Acc)) <= (int64_t{16} << 20);
  Workspace<Acc>& main_ws = Workspace<Acc>::mine();
  Acc* sb = shared ? grown(main_ws.shared_b, nb * kblocks * block_b) : nullptr;
  unsigned char* snb = shared && native ? grown(main_ws.shared_native_b, nb * kblocks * panels_b * bytes_b) : nullptr;
  char* sok = shared && native ? grown(main_ws.shared_ok_b, nb * kblocks * panels_b) : nullptr;
  if (shared) {
    parallel_dynamic(nt, nb * kblocks, [&](int64_t i) {
      const int64_t n0 = (i / kblocks) * nc, k0 = (i % kblocks) * KB, nn = std::min(nc, N - n0);
      const int64_t kc = std::min(KB, K - k0);
      b.pack(sb + i * block_b, n0, nn, k0, kc, NR);
      if (native)
        repack_panels(kn.repack_b, sb + i * block_b, ceil_div(nn, NR), NR, kc, snb + i * panels_b * bytes_b, bytes_b,
                      sok + i * panels_b);
    });
  }
  parallel_dynamic(nt, tiles, [&](int64_t t) {
    const int64_t m0 = (t / nb) * mc, n0 = (t % nb) * nc;
    const int64_t mn = std::min(mc, M - m0), nn = std::min(nc, N - n0);
    const int64_t mp = ceil_div(mn, MR), np = ceil_div(nn, NR), ldc = np * NR;
    Workspace<Acc>& ws = Workspace<Acc>::mine();
    Acc* pa = grown(ws.a, mp * MR * KB);
    Acc* pb = shared ? nullptr : grown(ws.b, np * NR * KB);
    Acc* pc = grown(ws.c, mp * MR * ldc);
    unsigned char* na = native ? grown(ws.native_a, mp * bytes_a) : nullptr;
    unsigned char* nbp = native && !shared ? grown(ws.native_b, np * bytes_b) : nullptr;
    char* oka = native ? grown(ws.ok_a, mp) : nullptr;
    char* okb = native && !shared ? grown(ws.ok_b, np) : nullptr;
    // A register tile that took the exact chain for one k block stays on it: its partial
    // sums may then be f32 subnormals, which the tile unit would flush.
    char* on_exact = native ? grown(ws.on_exact, mp * np) : nullptr;
    if (native) std::fill_n(on_exact, mp * np, char(0));
    if (kn.begin) kn.begin();
    if (K == 0) std::fill_n(pc, mp * MR * ldc, Acc(0));
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
      const int64_t kc = std::min(KB, K - k0);
      if (shared) {
        const int64_t block = (t % nb) * kblocks + k0 / KB;
        pb = sb + block * block_b;
        if (native) nbp = snb + block * panels_b * bytes_b, okb = sok + block * panels_b;
      } else {
        b.pack(pb, n0, nn, k0, kc, NR);
        if (native) repack_panels(kn.repack_b, pb, np, NR, kc, nbp, bytes_b, okb);
      }
      a.pack_rows(pa, m0, mn, k0, kc, MR);
      if (native) repack_panels(kn.repack_a, pa, mp, MR, kc, na, bytes_a, oka);
      for (int64_t j = 0; j < np; ++j) {
        const bool half = nn - j * NR <= NR / 2;
        for (int64_t i = 0; i < mp; ++i) {
          const Acc *a32 = pa + i * MR * kc, *b32 = pb + j * NR * kc;
          Acc* c = pc + i * MR * ldc + j * NR;
          if (!native) {
            if (kn.fn_cols)
              kn.fn_cols(kc, a32, b32, c, ldc, k0 == 0, std::min(NR, nn - j * NR));
            else
              kn.fn(kc, a32, b32, c, ldc, k0 == 0, half);
          } else if (oka[i] && okb[j] && !on_exact[i * np + j]) {
            kn.fn(kc, na + i * bytes_a, nbp + j * bytes_b, c, ldc, k0 == 0, half);
          } else {
            on_exact[i * np + j] = 1;
            exact_tile(MR, NR, kc, a32, b32, c, ldc, k0 == 0, half);
          }
        }
      }
    }
    if (kn.end) kn.end();
    store_tile(pc, ldc, m0, mn, n0, nn, out, ep);
  });
}

}  // namespace hg::cpu::gemm
