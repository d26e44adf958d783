// The SIMT matrix products (cuda/matmul_simt.cu): the f64 path and strict f32 of the cuda
// bmm and linear kernels (cuda/matmul_tc.cu), which choose between them and tensor cores.
#pragma once
#include "framework/tensor.h"

namespace hg::cuda {

// out[b] = a[b] · bm[b]: the bmm_stub contract (ops/matmul_kernels.h), any floating dtype.
void bmm_simt(const Tensor& a, const Tensor& b, const Tensor& out);
// out = x · w^T + bias: the linear_stub contract (ops/matmul_kernels.h), any floating dtype.
void linear_simt(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out);

}  // namespace hg::cuda
