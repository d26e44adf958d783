// The operand sources of the tensor-core GEMM engine (cuda/mma_gemm.h) and how a block
// stages their tiles in shared memory with cp.async. Include from .cu files only.
//
// An operand source (A is M x K, B is K x N, per batch entry z) is a small struct:
//   using Element = half | bfloat16 | float;   what is staged (f32 for the tf32 modes)
//   static constexpr bool kContiguousK;        true: a *line* is a row m of A / a column n
//       of B and runs along k; false: a line is one k and runs along m (A) or n (B).
//       Shared memory keeps each line's elements contiguous, so global loads are 16-byte
//       chunks along a line and ldmatrix reads them plain (K) or with .trans (M/N).
//   Line line(int64_t z, int64_t index) const;  what the source precomputes for one line:
//       a pointer for a strided matrix; for a convolution the decoded pixel (n, p, q) of an
//       im2col row. Called only for lines inside the matrix. For K-contiguous sources each
//       thread calls it once per output tile and keeps its lines for the whole K loop (the
//       expensive row decode is not repeated per k step); for M/N-contiguous sources, once
//       per chunk per k step.
//   Chunk<Element> chunk(const Line&, int64_t e, int n) const;  about elements e .. e+n-1
//       of the line (1 <= n <= V = 16 / sizeof(Element), all inside the matrix):
//       {p, copy}: they are stored contiguously at p (one cp.async when p is 16-byte aligned,
//       the rest of the chunk zero-filled; element by element otherwise); {_, zero}: all are
//       zero (a convolution's padding); {_, elements}: ask element() for each (a strided
//       view, or a chunk that straddles two conv taps).
//   const Element* element(const Line&, int64_t e) const;  element e's address, or nullptr
//       where the element is zero.
//   Optional: static constexpr bool kAligned = true: every chunk is a copy from a 16-byte
//       aligned address (the host checked it), so the kernel has no element-by-element path;
//   static constexpr bool kCheapLine = true: line() costs about as much as keeping its
//       result, so K-contiguous lines are recomputed per k step rather than held in registers.
//   Both exist to keep the kernel within its register budget (MmaTileLarge, cuda/mma_gemm.h).
// Elements outside the matrix (tile borders, K tails) are never asked for: zeros are
// staged there, so any M, N, K and any alignment give the right answer without reading
// out of bounds.
#pragma once
#include <algorithm>
#include <cstdint>

#include "cuda/mma_smem_layout.h"
#include "cuda/primitives/cp_async.h"

// Fragment and accumulator arrays stay in registers only if every loop indexing them is
// unrolled; nvcc does not always do it unasked. (The host compiler needs no hint.)
// HG_MMA_NO_UNROLL keeps a loop rolled where unrolling would cost registers.
#if defined(__CUDA_ARCH__)
#define HG_MMA_UNROLL _Pragma("unroll")
#define HG_MMA_NO_UNROLL _Pragma("unroll 1")
#else
#define HG_MMA_UNROLL
#define HG_MMA_NO_UNROLL
#endif

namespace hg::cuda {

enum class ChunkKind : uint8_t { copy, zero, elements };
template <class E>
struct Chunk {
  const E* p;
  ChunkKind kind;
};

template <class Src>
constexpr bool source_aligned = requires { requires Src::kAligned; };
template <class Src>
constexpr bool source_cheap_line = requires { requires Src::kCheapLine; };

// How one operand is staged: Rows is the tile's extent along M (A) or N (B).
template <class Src, int Rows, int BK>
struct StagedOperand : MmaSmemOperand<sizeof(typename Src::Element), Src::kContiguousK, Rows, BK> {
  using E = typename Src::Element;
};

namespace mma_detail {

// One 16-byte chunk of a line into shared memory at dst: elements e .. e+V-1 of `line`,
// of which those at or past `extent` (and all, when !live) are zeros.
template <class Op, class Src>
HG_DEVICE void stage_chunk(const Src& src, bool live, const typename Src::Line& line, int64_t e, int64_t extent,
                           typename Op::E* dst) {
  using E = typename Op::E;
  const E zero{};
  if (!live || e >= extent) {
    HG_MMA_UNROLL
    for (int j = 0; j < Op::V; ++j) dst[j] = zero;
    return;
  }
  const int n = static_cast<int>(std::min<int64_t>(Op::V, extent - e));
  if constexpr (source_aligned<Src>) {
    cp_async<16>(dst, src.chunk(line, e, n).p, static_cast<uint32_t>(n * sizeof(E)));
    return;
  }
  const Chunk<E> c = src.chunk(line, e, n);
  if (c.kind == ChunkKind::zero) {
    HG_MMA_UNROLL
    for (int j = 0; j < Op::V; ++j) dst[j] = zero;
  } else if (c.kind == ChunkKind::copy && reinterpret_cast<uintptr_t>(c.p) % 16 == 0) {
    cp_async<16>(dst, c.p, static_cast<uint32_t>(n * sizeof(E)));
  } else {
    HG_MMA_NO_UNROLL  // unrolled, its V loads in flight set the whole kernel's register count
    for (int j = 0; j < Op::V; ++j) {
      const E* p = j < n ? src.element(line, e + j) : nullptr;
      dst[j] = p ? *p : zero;
    }
  }
}

// The lines a thread stages for one operand; K-contiguous sources keep them for a tile
// unless line() is cheap.
template <class Op, class Src, int Threads>
struct OperandLoader {
  static constexpr int kIters = (Op::kChunks + Threads - 1) / Threads;
  static constexpr int kChunksPerLine = Op::kLineLen / Op::V;
  static constexpr bool kKeep = Op::kK && !source_cheap_line<Src>;
  typename Src::Line lines[kKeep ? kIters : 1];
  bool live[kKeep ? kIters : 1];

  // Tile origin r0 along M / N, `rows` the matrix's extent there.
  HG_DEVICE void start_tile(const Src& src, int t, int64_t z, int64_t r0, int64_t rows) {
    if constexpr (kKeep) {
      HG_MMA_UNROLL
      for (int i = 0; i < kIters; ++i) {
        const int c = t + i * Threads;
        const int64_t r = r0 + c / kChunksPerLine;
        live[i] = c < Op::kChunks && r < rows;
        lines[i] = live[i] ? src.line(z, r) : typename Src::Line{};
      }
    }
  }

  // Stages the k step starting at k0 into `tile`; `rows` and K bound the matrix.
  HG_DEVICE void load(const Src& src, int t, int64_t z, int64_t r0, int64_t rows, int64_t k0, int64_t K,
                      typename Op::E* tile) const {
    HG_MMA_UNROLL
    for (int i = 0; i < kIters; ++i) {
      const int c = t + i * Threads;
      if (Op::kChunks % Threads != 0 && c >= Op::kChunks) break;
      const int li = c / kChunksPerLine, off = c % kChunksPerLine * Op::V;
      typename Op::E* dst = tile + li * Op::kPitch + off;
      if constexpr (kKeep) {
        stage_chunk<Op>(src, live[i], lines[i], k0 + off, K, dst);
      } else if constexpr (Op::kK) {
        const int64_t r = r0 + li;
        const bool in = (Op::kChunks % Threads == 0 || c < Op::kChunks) && r < rows;
        stage_chunk<Op>(src, in, in ? src.line(z, r) : typename Src::Line{}, k0 + off, K, dst);
      } else {
        const int64_t k = k0 + li;
        typename Src::Line line{};
        if (k < K) line = src.line(z, k);
        stage_chunk<Op>(src, k < K, line, r0 + off, rows, dst);
      }
    }
  }
};

}  // namespace mma_detail

}  // namespace hg::cuda
