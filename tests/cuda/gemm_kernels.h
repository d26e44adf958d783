// Host entry points that run the tensor-core GEMM engine (cuda/mma_gemm.h) directly on
// cuda:0 (tests/cuda/gemm_kernels.cu), so tests can choose the tile config and epilogue
// that bmm's dispatch would choose for them.
#pragma once
#include "framework/tensor.h"

namespace hg::test::kernels {

enum class GemmTile { small, large };        // MmaTileSmall / MmaTileLarge
enum class GemmMode { f16, bf16, tf32, tf32x3 };  // cuda::MmaMode

// out[z] = relu?(alpha * a[z] · b[z] + bias) on cuda:0 for a [B, M, K] and b [B, K, N] of
// the mode's input dtype (f16, bf16, f32 for the tf32 modes) with any strides; out
// [B, M, N] contiguous of the input dtype (or, in mode f16, also bf16 or f32); bias [N]
// of out's dtype, or undefined.
void mma_gemm(GemmTile tile, GemmMode mode, const Tensor& a, const Tensor& b, const Tensor& out,
              const Tensor& bias = Tensor(), float alpha = 1.0f, bool relu = false);

}  // namespace hg::test::kernels
