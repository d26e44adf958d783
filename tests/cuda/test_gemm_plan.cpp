// The mma.sync engine's tile and split-K rule (cuda/gemm_plan.h) as plain arithmetic, every
// build: the plans for the U-Net's real shapes on an H200 (132 SMs), the forcing knobs, the
// chunk arithmetic, bad input.
#include <catch2/catch.hpp>

#include "cuda/gemm_plan.h"
#include "cuda/kernel_settings.h"
#include "framework/error.h"

using namespace hg;
using cuda::MmaTileChoice;

namespace {

// Every chunk is non-empty, a whole number of k-steps but the last, and together they cover K.
void require_chunks_cover(const cuda::GemmTilePlan& p, int64_t K, int bk) {
  REQUIRE(p.ctas == p.tiles * p.split);
  if (p.split == 1) {
    REQUIRE(p.k_chunk == K);
    return;
  }
  REQUIRE(p.k_chunk % bk == 0);
  REQUIRE(p.k_chunk * p.split >= K);
  REQUIRE(p.k_chunk * (p.split - 1) < K);
}

}  // namespace

TEST_CASE("gemm_tile_plan gives the U-Net's level-0 conv weight gradient >= 100 CTAs on 132 SMs", "[cuda][splitk]") {
  // segbench's U-Net at batch 16, 256 x 256, width 64: gw = gy^T . im2col(x) is
  // M = 64 filters x N = 3*3*64 = 576 taps, summed over K = 16 * 256 * 256 pixels.
  const int64_t K = int64_t{16} * 256 * 256;
  const cuda::GemmTilePlan p = cuda::gemm_tile_plan(1, 64, 576, K, 132, 32);
  CHECK(p.tile == MmaTileChoice::small);
  CHECK(p.tiles == 9);
  CHECK(p.split == 15);
  CHECK(p.ctas >= 100);
  require_chunks_cover(p, K, 32);
  // Without split-K it was 9 CTAs on 132 SMs: the rule must not leave that.
  CHECK(cuda::gemm_tile_plan(1, 64, 576, K, 132, 32, MmaTileChoice::automatic, 1).ctas == 9);
}

TEST_CASE("gemm_tile_plan: the U-Net's other weight gradients, its head and large GEMMs on 132 SMs", "[cuda][splitk]") {
  struct Level {
    int64_t cin, cout, hw;
    int split;
  };
  // Encoder and decoder convolutions (3x3): M = cout, N = 9 cin, K = 16 hw^2. Deep levels
  // have enough tiles (or too little K per tile) and are not split.
  const Level levels[] = {{64, 64, 256, 15},   {64, 128, 128, 8},  {128, 128, 128, 4}, {128, 256, 64, 2},
                          {256, 256, 64, 1},   {256, 512, 32, 1},  {1024, 512, 32, 1}, {128, 64, 256, 8}};
  for (const Level& l : levels) {
    INFO("cin " << l.cin << " cout " << l.cout << " @" << l.hw);
    const int64_t K = 16 * l.hw * l.hw;
    const cuda::GemmTilePlan p = cuda::gemm_tile_plan(1, l.cout, 9 * l.cin, K, 132, 32);
    CHECK(p.split == l.split);
    require_chunks_cover(p, K, 32);
    if (p.split > 1) CHECK(p.ctas >= 66);  // at least half the SMs busy
  }
  // The 1x1 head's weight gradient (2 classes from 64 channels): one tile, split to the cap.
  const cuda::GemmTilePlan head = cuda::gemm_tile_plan(1, 2, 64, int64_t{16} * 256 * 256, 132, 32);
  CHECK(head.tiles == 1);
  CHECK(head.split == cuda::kMaxSplit);
  // Forward convolutions with 16 or 32 output channels get the narrow tile, 64 the small one.
  CHECK(cuda::gemm_tile_plan(1, 16 * 256 * 256, 16, 9 * 16, 132, 32).tile == MmaTileChoice::narrow);
  CHECK(cuda::gemm_tile_plan(1, 16 * 256 * 256, 32, 9 * 16, 132, 32).tile == MmaTileChoice::narrow);
  CHECK(cuda::gemm_tile_plan(1, 16 * 256 * 256, 64, 9 * 16, 132, 32).tile == MmaTileChoice::small);
  // Big square GEMMs: large tiles, never split.
  const cuda::GemmTilePlan big = cuda::gemm_tile_plan(1, 4096, 4096, 4096, 132, 32);
  CHECK(big.tile == MmaTileChoice::large);
  CHECK(big.split == 1);
  // Shallow K is never split by the rule, however few the tiles.
  CHECK(cuda::gemm_tile_plan(1, 64, 64, 2047, 132, 32).split == 1);
  CHECK(cuda::gemm_tile_plan(1, 64, 64, 2048, 132, 32).split == 2);
}

TEST_CASE("gemm_tile_plan's forcing knobs and errors", "[cuda][splitk]") {
  // A forced split ignores the depth minimum, is capped at the k-steps, never leaves an empty chunk.
  // Chunks are whole k-steps: 3 requested over K = 100 (4 k-steps of 32) give ceil(4 / 3) = 2
  // steps per chunk, so 2 chunks (64 and 36); 4 requested give 4 (32, 32, 32, 4).
  const cuda::GemmTilePlan p = cuda::gemm_tile_plan(1, 64, 64, 100, 2, 32, MmaTileChoice::automatic, 3);
  CHECK(p.split == 2);
  CHECK(p.k_chunk == 64);
  require_chunks_cover(p, 100, 32);
  const cuda::GemmTilePlan p4 = cuda::gemm_tile_plan(1, 64, 64, 100, 2, 32, MmaTileChoice::automatic, 4);
  CHECK(p4.split == 4);
  CHECK(p4.k_chunk == 32);
  // 5 requested over 4 k-steps: capped at 4.
  CHECK(cuda::gemm_tile_plan(1, 64, 64, 100, 2, 32, MmaTileChoice::automatic, 5).split == 4);
  CHECK(cuda::gemm_tile_plan(1, 64, 64, 96, 2, 32, MmaTileChoice::automatic, 8).split == 3);
  // A forced tile wins, except that a split large tile runs the small one.
  CHECK(cuda::gemm_tile_plan(1, 4096, 4096, 64, 132, 32, MmaTileChoice::narrow).bn == 32);
  const cuda::GemmTilePlan ls = cuda::gemm_tile_plan(1, 256, 256, 256, 132, 32, MmaTileChoice::large, 2);
  CHECK(ls.tile == MmaTileChoice::small);
  CHECK(ls.tiles == 16);
  CHECK(ls.split == 2);
  // The knobs through kernel_settings, and their parsing.
  {
    const cuda::ScopedSplitK split(4);
    const cuda::ScopedMmaTile tile(MmaTileChoice::narrow);
    const cuda::GemmTilePlan q = cuda::gemm_tile_plan_with_settings(1, 64, 64, 1000, 132, 32);
    CHECK(q.split == 4);
    CHECK(q.tile == MmaTileChoice::narrow);
  }
  CHECK(cuda::forced_split_k() == 0);
  CHECK(cuda::parse_split_k("auto") == 0);
  CHECK(cuda::parse_split_k("12") == 12);
  CHECK_THROWS_AS(cuda::parse_split_k("0"), Error);
  CHECK_THROWS_AS(cuda::parse_split_k("x"), Error);
  CHECK(cuda::parse_mma_tile("narrow") == MmaTileChoice::narrow);
  CHECK_THROWS_AS(cuda::parse_mma_tile("wide"), Error);
  CHECK(cuda::parse_hopper_tile_n("256") == 256);
  CHECK_THROWS_AS(cuda::parse_hopper_tile_n("64"), Error);
  CHECK_THROWS_AS(cuda::set_forced_hopper_tile_n(192), Error);
  CHECK_THROWS_AS(cuda::gemm_tile_plan(1, -1, 64, 64, 132, 32), Error);
  CHECK_THROWS_AS(cuda::gemm_tile_plan(1, 64, 64, 64, 0, 32), Error);
}
