// cuda/hopper_transpose.h: a 32 x 32 tile per block step goes through shared memory, read
// along n and written along k, so each warp reads 32 consecutive elements of a b row and
// writes 32 consecutive elements of an output row (64 bytes each, whole 32-byte sectors),
// where the generic copy reads or writes one element per row.
#include "cuda/hopper_transpose.h"

#include <algorithm>
#include <cstdint>

#include "cuda/launch.h"
#include "cuda/primitives/barrier.h"
#include "cuda/stream.h"
#include "framework/error.h"

namespace hg::cuda {
namespace {

constexpr int kTile = 32, kRows = 8;  // a 32 x 8 block moves a 32 x 32 tile, 4 rows per thread

// dst[z, n, k] = src[z * sb + k * sk + n * sn] for 16-bit elements (moved as bits). The
// tile's odd pitch (33 elements) spreads a column's 32 elements over 32 banks.
__global__ void __launch_bounds__(kTile * kRows)
    transpose_k_major_kernel(int64_t batches, int64_t K, int64_t N, const uint16_t* src, int64_t sb, int64_t sk,
                             int64_t sn, uint16_t* dst) {
  __shared__ uint16_t tile[kTile][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t k_tiles = (K + kTile - 1) / kTile, n_tiles = (N + kTile - 1) / kTile;
  for (int64_t z = blockIdx.z; z < batches; z += gridDim.z)
    for (int64_t tk = blockIdx.y; tk < k_tiles; tk += gridDim.y)
      for (int64_t tn = blockIdx.x; tn < n_tiles; tn += gridDim.x) {
        const int64_t k0 = tk * kTile, n0 = tn * kTile;
        for (int r = ty; r < kTile; r += kRows) {  // rows of b (one k), lanes along n
          const int64_t k = k0 + r, n = n0 + tx;
          if (k < K && n < N) tile[r][tx] = src[z * sb + k * sk + n * sn];
        }
        sync_threads();
        for (int r = ty; r < kTile; r += kRows) {  // rows of the output (one n), lanes along k
          const int64_t n = n0 + r, k = k0 + tx;
          if (n < N && k < K) dst[(z * N + n) * K + k] = tile[tx][r];
        }
        sync_threads();  // the tile is read before the next step overwrites it
      }
}

}  // namespace

Tensor transpose_k_major(const Tensor& b) {
  HG_CHECK(b.dim() == 3 && (b.dtype() == DType::f16 || b.dtype() == DType::bf16) && b.device().is_cuda(),
           "transpose_k_major: b must be a 3-d f16 or bf16 tensor on a cuda device, got ", b.dim(), "-d ",
           dtype_name(b.dtype()), " on ", b.device().str());
  const int64_t B = b.size(0), K = b.size(1), N = b.size(2);
  Tensor out = empty({B, N, K}, {.dtype = b.dtype(), .device = b.device()});
  if (out.numel() == 0) return out;
  const auto cap = [](int64_t tiles, int64_t limit) { return static_cast<unsigned>(std::min(tiles, limit)); };
  const dim3 grid(cap((N + kTile - 1) / kTile, int64_t{1} << 20), cap((K + kTile - 1) / kTile, 65535), cap(B, 65535));
  const int device = b.device().index;
  launch(transpose_k_major_kernel,
         {.grid = grid, .block = dim3(kTile, kRows), .stream = current_stream(device), .name = "transpose_k_major"},
         B, K, N, static_cast<const uint16_t*>(b.data_ptr()), b.strides()[0], b.strides()[1], b.strides()[2],
         static_cast<uint16_t*>(out.data_ptr()));
  return out;
}

}  // namespace hg::cuda
