// The SIMT convolution kernels (cuda/conv2d_simt.cu): the f64 and strict-f32 paths of the
// cuda conv2d stubs (cuda/conv2d_implicit_gemm.cu chooses between them and tensor cores).
#pragma once
#include "cuda/conv2d_indexing.h"
#include "framework/tensor.h"
#include "ops/conv2d_kernels.h"

namespace hg::cuda {

// The GEMM view of a convolution of x [N,H,W,C], w [K,R,S,Cg] and y [N,P,Q,K] (all
// contiguous; hg::Error otherwise).
ConvShape conv_shape(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p);

// The conv2d_*_stub contracts (ops/conv2d_kernels.h), any floating dtype.
void conv2d_forward_simt(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dOptions& p);
void conv2d_dgrad_simt(const Tensor& gy, const Tensor& w, const Tensor& bias, const Tensor& gx, const Conv2dOptions& p);
void conv2d_wgrad_simt(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dOptions& p);

}  // namespace hg::cuda
