// cuBLAS / cuDNN as references: the same contracts as the bmm and conv2d dispatch stubs
// (ops/matmul_kernels.h, ops/conv2d_kernels.h), run by the vendor libraries instead of our
// kernels. The CUDA kernels call these when kernel_settings.h selects Provider::vendor;
// tests and benchmarks call them directly for A/B comparisons. The libraries are loaded
// with dlopen on first use, so libhalfgrad never depends on them at load time. Under the
// emulation, or where a library cannot be loaded, each call raises hg::Error saying why.
#pragma once
#include <string>

#include "framework/tensor.h"
#include "ops/conv2d_kernels.h"

namespace hg::cuda::vendor {

// "" when cuBLAS (resp. cuDNN) can be used here, else why not.
std::string cublas_unavailable_reason();
std::string cudnn_unavailable_reason();

// out[b] = a[b] · bm[b]; any strides cuBLAS can express (a copy is made otherwise); f32
// obeys kernel_settings' f32_matmul(): strict -> CUBLAS_COMPUTE_32F, fast ->
// CUBLAS_COMPUTE_32F_FAST_TF32, accurate -> CUBLAS_COMPUTE_32F (cuBLAS has no 3xTF32 mode).
void bmm(const Tensor& a, const Tensor& b, const Tensor& out);
// cuDNN, NHWC / KRSC, contiguous tensors, the algorithm found once per shape; f16/bf16 on
// tensor cores with f32 compute; f32: strict and accurate -> CUDNN_FMA_MATH (plain f32),
// fast -> CUDNN_DEFAULT_MATH (TF32 allowed).
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p);
void conv2d_dgrad(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dOptions& p);
void conv2d_wgrad(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dOptions& p);

}  // namespace hg::cuda::vendor
