// B made K-contiguous for the Hopper kernel, which reads B as N x K rows: a row-major
// [B, K, N] b (the NN product) is transposed through shared memory rather than by the
// generic strided copy, so that both its reads and its writes are coalesced.
#pragma once
#include "framework/tensor.h"

namespace hg::cuda {

// A new contiguous [B, N, K] tensor t with t[z, n, k] = b[z, k, n], on b's device and
// stream, for a 3-d f16 or bf16 b on a cuda device with any strides (coalesced reads when
// b's last axis is contiguous). hg::Error for any other b.
Tensor transpose_k_major(const Tensor& b);

}  // namespace hg::cuda
