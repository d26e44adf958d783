// A tiled SIMT GEMM in shared memory, the matmul and convolution kernels until the
// tensor-core ones land: out(z, i, j) = sum_k a(z, i, k) * b(z, k, j), where a and b are
// index functors (strided matrices, im2col gathers) that widen their element to the
// accumulation type, and out rounds the sum once. Include from .cu files only.
#pragma once
#include <algorithm>
#include <cstdint>

#include "cuda/launch.h"
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/common.h"

namespace hg::cuda {

// A block computes a kTileM x kTileN tile of one batch entry with 16 x 16 threads, each
// owning a 2 x 2 patch, and steps through the reduction kTileK at a time.
inline constexpr int kTileM = 32, kTileN = 32, kTileK = 16, kGemmThreads = 256;

// Tile counts can exceed the grid limits (conv has N*P*Q rows): the loops stride by the
// grid, and every bound they test is the same for the whole block, so the barriers inside
// are reached by all of its threads.
template <class Acc, class A, class B, class Out>
__global__ void __launch_bounds__(kGemmThreads)
    simt_gemm_kernel(int64_t batches, int64_t M, int64_t N, int64_t K, A a, B b, Out out) {
  // +1 column: a thread row reads a column of a_tile, which would otherwise hit one bank.
  __shared__ Acc a_tile[kTileK][kTileM + 1];
  __shared__ Acc b_tile[kTileK][kTileN];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y), t = ty * 16 + tx;
  const int64_t m_tiles = (M + kTileM - 1) / kTileM, n_tiles = (N + kTileN - 1) / kTileN;
  for (int64_t z = blockIdx.z; z < batches; z += gridDim.z)
    for (int64_t tn = blockIdx.y; tn < n_tiles; tn += gridDim.y)
      for (int64_t tm = blockIdx.x; tm < m_tiles; tm += gridDim.x) {
        const int64_t m0 = tm * kTileM, n0 = tn * kTileN;
        Acc acc[2][2] = {{Acc(0), Acc(0)}, {Acc(0), Acc(0)}};
        for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
          // Each thread stages two elements of each operand; outside the matrix it stages 0.
          for (int e = t; e < kTileM * kTileK; e += kGemmThreads) {
            const int i = e / kTileK, k = e % kTileK;
            a_tile[k][i] = (m0 + i < M && k0 + k < K) ? a(z, m0 + i, k0 + k) : Acc(0);
          }
          for (int e = t; e < kTileK * kTileN; e += kGemmThreads) {
            const int k = e / kTileN, j = e % kTileN;
            b_tile[k][j] = (k0 + k < K && n0 + j < N) ? b(z, k0 + k, n0 + j) : Acc(0);
          }
          sync_threads();
          for (int k = 0; k < kTileK; ++k)
            for (int i = 0; i < 2; ++i)
              for (int j = 0; j < 2; ++j) acc[i][j] += a_tile[k][ty + 16 * i] * b_tile[k][tx + 16 * j];
          sync_threads();
        }
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) {
            const int64_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
            if (row < M && col < N) out(z, row, col, acc[i][j]);
          }
      }
}

// Launches simt_gemm_kernel on `device`'s current stream; grids are capped so that huge
// problems loop inside the kernel instead of failing the launch.
template <class Acc, class A, class B, class Out>
void simt_gemm(int device, const char* name, int64_t batches, int64_t M, int64_t N, int64_t K, const A& a,
               const B& b, const Out& out) {
  if (batches == 0 || M == 0 || N == 0) return;
  const auto cap = [](int64_t tiles, int64_t limit) { return static_cast<unsigned>(std::min(tiles, limit)); };
  const dim3 grid(cap((M + kTileM - 1) / kTileM, int64_t{1} << 20), cap((N + kTileN - 1) / kTileN, 65535),
                  cap(batches, 65535));
  launch(simt_gemm_kernel<Acc, A, B, Out>,
         {.grid = grid, .block = dim3(16, 16), .stream = current_stream(device), .name = name}, batches, M, N, K, a, b,
         out);
}

}  // namespace hg::cuda
