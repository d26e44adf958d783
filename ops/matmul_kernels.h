// The kernel interface of matrix products, implemented by every backend.
#pragma once
#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// out[b] = a[b] · bm[b] for a [B, M, K], bm [B, K, N] of one floating dtype with any
// strides; out [B, M, N] contiguous, same dtype.
extern DispatchStub<void(const Tensor& a, const Tensor& b, const Tensor& out)> bmm_stub;

}  // namespace hg
