// Rows spread over groups of threads, for kernels that reduce along short rows (softmax over
// a few classes, cross-entropy): a group of G lanes (a power of two up to 256) per row, so a
// row of 3 classes occupies 4 threads rather than a block. Groups of up to 32 reduce with
// warp shuffles, larger ones (one row per block) with block_reduce. Include from .cu files.
#pragma once
#include <algorithm>
#include <cstdint>

#include "cuda/block_reduce.h"
#include "cuda/launch_config.h"

namespace hg::cuda {

struct RowGroups {
  int64_t rows;
  unsigned group;  // lanes per row
};

// Reduces v over the lanes of each group; every lane gets its group's result. Every thread
// of the block must call it (for_each_row keeps them together), active or not.
template <class A, class Op>
HG_DEVICE A group_reduce(A v, Op op, A identity, unsigned group) {
  if (group > 32) return block_reduce(v, op, identity);
  for (unsigned o = group / 2; o > 0; o >>= 1) v = op(v, shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Calls f(row, lane, active) for each of the block's rows in a grid-stride loop; every thread
// runs the same number of iterations (inactive past the last row) so that the shuffles and
// barriers of group_reduce see the whole warp and block.
template <class F>
HG_DEVICE void for_each_row(const RowGroups& g, F f) {
  const unsigned per_block = blockDim.x / g.group;
  const int64_t step = int64_t{gridDim.x} * per_block;
  for (int64_t base = int64_t{blockIdx.x} * per_block; base < g.rows; base += step) {
    const int64_t row = base + threadIdx.x / g.group;
    f(row, threadIdx.x % g.group, row < g.rows);
  }
}

// Host side: the group for rows of length n (the smallest power of two >= n, at most 256).
inline RowGroups row_groups(int64_t rows, int64_t n) {
  unsigned g = 1;
  while (g < 256 && g < n) g *= 2;
  return {rows, g};
}

// 256 threads (several rows) per block for groups up to 32, one row of `group` threads per
// block above; the grid-stride loop covers rows past 4096 blocks.
inline LaunchConfig row_config(const RowGroups& g, int device, const char* name) {
  const unsigned block = g.group > 32 ? g.group : 256;
  const int64_t per_block = block / g.group;
  const int64_t blocks = std::clamp<int64_t>((g.rows + per_block - 1) / per_block, 1, 4096);
  return {.grid = static_cast<unsigned>(blocks), .block = block, .stream = current_stream(device), .name = name};
}

}  // namespace hg::cuda
