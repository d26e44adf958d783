// The mma.sync engine's tile and split-K rule (cuda/gemm_plan.h): host arithmetic only,
// compiled in every build so its tests run without a GPU.
#include "cuda/gemm_plan.h"

#include <algorithm>

#include "framework/error.h"

namespace hg::cuda {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

MmaTileChoice auto_tile(int64_t batches, int64_t M, int64_t N) {
  if (N <= 32) return MmaTileChoice::narrow;
  if (N <= 64 || M <= 64) return MmaTileChoice::small;
  return batches * ceil_div(M, 128) * ceil_div(N, 128) >= kLargeTileMinimum ? MmaTileChoice::large
                                                                             : MmaTileChoice::small;
}

}  // namespace

GemmTilePlan gemm_tile_plan(int64_t batches, int64_t M, int64_t N, int64_t K, int sms, int bk,
                            MmaTileChoice forced_tile, int forced_split) {
  HG_CHECK(batches >= 0 && M >= 0 && N >= 0 && K >= 0, "gemm_tile_plan: sizes must be >= 0, got batches ", batches,
           ", M ", M, ", N ", N, ", K ", K);
  HG_CHECK(sms >= 1 && bk >= 1, "gemm_tile_plan: need sms >= 1 and bk >= 1, got sms ", sms, ", bk ", bk);
  HG_CHECK(forced_split >= 0, "gemm_tile_plan: a forced split must be >= 1 (or 0 for the rule), got ", forced_split);
  GemmTilePlan p;
  p.tile = forced_tile == MmaTileChoice::automatic ? auto_tile(batches, M, N) : forced_tile;
  p.bm = p.tile == MmaTileChoice::large ? 128 : 64;
  p.bn = p.tile == MmaTileChoice::large ? 128 : p.tile == MmaTileChoice::small ? 64 : 32;
  p.tiles = batches * ceil_div(M, p.bm) * ceil_div(N, p.bn);
  const int64_t k_steps = ceil_div(K, bk);
  int64_t split = 1;
  if (forced_split > 0) {
    split = std::min<int64_t>(forced_split, std::max<int64_t>(k_steps, 1));
  } else if (p.tiles > 0 && p.tiles < sms) {
    split = std::min<int64_t>({ceil_div(sms, p.tiles), K / kMinSplitDepth, kMaxSplit});
  }
  if (split >= 2) {
    p.k_chunk = ceil_div(ceil_div(K, split), bk) * bk;
    split = ceil_div(K, p.k_chunk);  // no empty chunk
  }
  if (split < 2) split = 1, p.k_chunk = K;
  if (split > 1 && p.tile == MmaTileChoice::large) {  // the large tile is never split: the small one runs
    p.tile = MmaTileChoice::small, p.bm = 64, p.bn = 64;
    p.tiles = batches * ceil_div(M, 64) * ceil_div(N, 64);
  }
  p.split = static_cast<int>(split);
  p.ctas = p.tiles * p.split;
  return p;
}

GemmTilePlan gemm_tile_plan_with_settings(int64_t batches, int64_t M, int64_t N, int64_t K, int sms, int bk) {
  return gemm_tile_plan(batches, M, N, K, sms, bk, forced_mma_tile(), forced_split_k());
}

}  // namespace hg::cuda
