// The tensor-core GEMM engine's block order (cuda/mma_tile_order.h), host only: every tile of
// the grid is taken exactly once, in bands of `group` M tiles walked column by column.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <utility>

#include "cuda/mma_tile_order.h"

using namespace hg::cuda;

TEST_CASE("grouped_tile takes every tile once, in bands of M tiles", "[cuda][mma][indexing]") {
  for (const int64_t group : {1, 3, 8})
    for (const int64_t m_tiles : {1, 2, 7, 8, 9, 17, 24})
      for (const int64_t n_tiles : {1, 3, 10}) {
        INFO("group " << group << ", " << m_tiles << " x " << n_tiles << " tiles");
        std::set<std::pair<int64_t, int64_t>> seen;
        for (int64_t tile = 0; tile < m_tiles * n_tiles; ++tile) {
          const TileCoord c = grouped_tile(tile, m_tiles, n_tiles, group);
          REQUIRE((c.m >= 0 && c.m < m_tiles && c.n >= 0 && c.n < n_tiles));
          seen.insert({c.m, c.n});
          // The hand-computed order: band b = tile / (group * n_tiles) holds M tiles
          // b*group .. b*group + h - 1 (h = group, or what is left in the last band),
          // and walks them down each column before moving right.
          const int64_t band = tile / (group * n_tiles), first = band * group;
          const int64_t h = std::min(group, m_tiles - first), i = tile - band * group * n_tiles;
          CHECK(c.m == first + i % h);
          CHECK(c.n == i / h);
        }
        CHECK(static_cast<int64_t>(seen.size()) == m_tiles * n_tiles);
      }
}

TEST_CASE("grouped_tile: 16 consecutive blocks of a 16 x 16 grid cover an 8 x 2 patch", "[cuda][mma][indexing]") {
  // Row-major order would cover 1 x 16 tiles: 16 B panels for 1 A panel; the patch needs
  // 8 A panels and 2 B panels, 10 instead of 17 distinct panels in L2.
  std::set<int64_t> ms, ns;
  for (int64_t tile = 32; tile < 48; ++tile) {
    const TileCoord c = grouped_tile(tile, 16, 16, 8);
    ms.insert(c.m);
    ns.insert(c.n);
  }
  CHECK(ms == std::set<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(ns == std::set<int64_t>{4, 5});
}
