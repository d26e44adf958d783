// One thread per index: launches f(i) for every i in [0, n) with a grid-stride loop, for
// kernels that compute each output element on its own (pooling, upsampling, normalising).
// Include from .cu files only.
#pragma once
#include <algorithm>
#include <cstdint>

#include "cuda/launch.h"
#include "cuda/primitives/common.h"

namespace hg::cuda {

template <class F>
__global__ void index_loop_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) f(i);
}

// F: a trivially copyable functor with HG_DEVICE void operator()(int64_t) const. The grid is
// capped at 1024 blocks of 256 threads, enough to fill a GPU, and the loop covers the rest.
template <class F>
void for_each_index(int device, const char* name, int64_t n, const F& f) {
  if (n <= 0) return;
  const unsigned threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 1024));
  launch(index_loop_kernel<F>, {.grid = blocks, .block = threads, .stream = current_stream(device), .name = name}, n, f);
}

}  // namespace hg::cuda
