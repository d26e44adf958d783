// The kernel interface of softmax and log_softmax, implemented by every backend. The
// op hands every tensor over as a contiguous [outer, n, inner] view, the normalised
// axis in the middle, so one kernel covers the last axis (inner = 1) and any other.
#pragma once
#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// y = softmax(x) (or log_softmax when `log`) along dimension 1; x and y of one floating
// dtype. The row maximum is subtracted first; sums accumulate in f32 (f64 for f64).
extern DispatchStub<void(const Tensor& x, const Tensor& y, bool log)> softmax_stub;
// gx from the incoming gradient g and the forward output y, along dimension 1:
//   softmax:     gx = y * (g - sum(g * y))
//   log_softmax: gx = g - exp(y) * sum(g)
extern DispatchStub<void(const Tensor& g, const Tensor& y, const Tensor& gx, bool log)> softmax_backward_stub;

}  // namespace hg
