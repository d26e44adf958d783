// The order in which the tensor-core GEMM engine's blocks take output tiles: grouped along M,
// so that the blocks resident at one time share rows of A and columns of B in L2. Host and
// device code, so host tests check that every tile is taken exactly once.
#pragma once
#include <cstdint>

#include "cuda/primitives/common.h"

namespace hg::cuda {

struct TileCoord {
  int64_t m, n;
};

// Tile `tile` of an m_tiles x n_tiles grid: tiles are dealt in bands of `group` M tiles (the
// last band may be narrower), column after column within a band. k consecutive blocks (k a
// multiple of group) thus cover a group x k/group patch of the output and read group A
// panels and k/group B panels, where the row-major order's 1 x k strip reads 1 and k.
HG_HOST_DEVICE TileCoord grouped_tile(int64_t tile, int64_t m_tiles, int64_t n_tiles, int64_t group) {
  const int64_t band = tile / (group * n_tiles), first = band * group;
  const int64_t height = m_tiles - first < group ? m_tiles - first : group;
  const int64_t in_band = tile - band * group * n_tiles;
  return {first + in_band % height, in_band / height};
}

}  // namespace hg::cuda
