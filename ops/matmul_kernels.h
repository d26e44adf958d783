// The kernel interface of matrix products, implemented by every backend.
#pragma once
#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// out[b] = a[b] · bm[b] for a [B, M, K], bm [B, K, N] of one floating dtype with any
// strides; out [B, M, N] contiguous, same dtype.
extern DispatchStub<void(const Tensor& a, const Tensor& b, const Tensor& out)> bmm_stub;

// out = x · w^T + bias for x [M, K] and w [N, K] with any strides, bias [N] contiguous or
// undefined, out [M, N] contiguous; one floating dtype. The bias joins the f32 (f64) sum
// before the one rounding into the output dtype.
extern DispatchStub<void(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out)> linear_stub;

}  // namespace hg
