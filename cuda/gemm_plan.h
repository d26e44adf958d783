// How the mma.sync engine (cuda/mma_gemm.h) tiles and splits a product, decided on the host
// from the shape and the GPU's SM count alone (never from scheduling), so that the choice is
// tested without a GPU and a product's result does not depend on how the GPU ran it.
//
// Tile: 64 x 32 (narrow) when N <= 32, 64 x 64 (small) when N <= 64 or M <= 64 or when the
// 128 x 128 tiles number fewer than kLargeTileMinimum, else 128 x 128 (large).
// Split-K: when the output tiles leave SMs idle (tiles < sms) and K is deep, K is cut into
// `split` equal chunks (multiples of the tile's k-step), one CTA per (tile, chunk):
//   split = min(ceil(sms / tiles), floor(K / kMinSplitDepth), kMaxSplit), 1 if that is < 2,
// then made exact: chunk = ceil(K / split) rounded up to the k-step, split = ceil(K / chunk).
// Each CTA writes its f32 partial tile to a workspace; a second kernel adds the chunks of an
// element in chunk order 0, 1, ..., split-1 and runs the epilogue: no atomics, so results are
// bit-identical run to run. kernel_settings' forcing knobs override the tile and the split
// (tests reach every path at small sizes): a forced split ignores kMinSplitDepth and the SM
// count but is capped at the number of k-steps. The large tile is never split (a split with
// a forced large tile runs the small tile).
#pragma once
#include <cstdint>

#include "cuda/kernel_settings.h"

namespace hg::cuda {

// Large tiles only when at least this many of them exist (one per SM of an A100-class GPU,
// less a few): fewer would leave SMs idle that 64 x 64 tiles keep busy.
inline constexpr int64_t kLargeTileMinimum = 96;
// A chunk of K at least this deep per CTA: its partial tile's write (BM x BN f32) then costs
// a few percent of its operand reads.
inline constexpr int64_t kMinSplitDepth = 1024;
// At most this many chunks (the workspace is split x batches x M x N f32).
inline constexpr int kMaxSplit = 32;

struct GemmTilePlan {
  MmaTileChoice tile = MmaTileChoice::small;  // never automatic here
  int bm = 64, bn = 64;
  int64_t tiles = 0;    // output tiles over all batch entries
  int split = 1;        // chunks of K (1: no split-K)
  int64_t k_chunk = 0;  // K elements per chunk (a multiple of bk; K itself when split == 1)
  int64_t ctas = 0;     // tiles * split: the work items the grid runs
};

// The plan for batches x (M x N) outputs summed over K on a GPU with `sms` SMs; bk is the
// tile's k-step (32 for 16-bit inputs, 16 for f32). The forced_* arguments are the
// kernel_settings knobs (MmaTileChoice::automatic / 0 = the rule). hg::Error on negative
// sizes, sms < 1 or bk < 1.
GemmTilePlan gemm_tile_plan(int64_t batches, int64_t M, int64_t N, int64_t K, int sms, int bk,
                            MmaTileChoice forced_tile = MmaTileChoice::automatic, int forced_split = 0);

// The same with the process's knobs (forced_mma_tile(), forced_split_k()).
GemmTilePlan gemm_tile_plan_with_settings(int64_t batches, int64_t M, int64_t N, int64_t K, int sms, int bk);

}  // namespace hg::cuda
