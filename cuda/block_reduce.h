// Block-wide reductions for kernels whose block size is a multiple of 32: a butterfly of
// warp shuffles (cuda/primitives/warp.h), then one warp over the per-warp results in
// shared memory. Every thread gets the result. Include from .cu files only.
#pragma once
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/warp.h"

namespace hg::cuda {

template <class A, class Op>
HG_DEVICE A warp_reduce(A v, Op op) {
  for (unsigned o = 16; o > 0; o >>= 1) v = op(v, shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// `identity` is op's neutral value; each call uses its own 32-slot shared array per A and
// Op, and the barriers around it let a kernel call it in a loop.
template <class A, class Op>
HG_DEVICE A block_reduce(A v, Op op, A identity) {
  __shared__ A partial[32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  sync_threads();  // the previous call's readers are done with `partial`
  if (lane == 0) partial[warp] = v;
  sync_threads();
  v = warp_reduce(lane < warps ? partial[lane] : identity, op);
  return v;
}

}  // namespace hg::cuda
