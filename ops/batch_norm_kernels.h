// The kernel interface of batch normalisation, implemented by every backend. x is a
// contiguous [M, C] view (channels last); per-channel vectors [C] have the statistics
// dtype S: f32 for f16/bf16/f32 data, f64 for f64. Sums accumulate in S.
#pragma once
#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// mean[c] and biased var[c] of x[:, c] (M >= 1), by a numerically sound method (not
// E[x^2] - E[x]^2).
extern DispatchStub<void(const Tensor& x, const Tensor& mean, const Tensor& var)> batch_norm_stats_stub;

// y = (x - mean) * invstd * weight + bias, computed in S and rounded once into y (x's
// dtype, contiguous [M, C]). weight/bias are undefined when there is no affine transform.
extern DispatchStub<void(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                         const Tensor& bias, const Tensor& y)>
    batch_norm_forward_stub;

// With xhat = (x - mean) * invstd: sum_gy[c] = sum(gy), sum_gy_xhat[c] = sum(gy * xhat), and,
// when gx is defined, gx = w * invstd * (gy - sum_gy / M - xhat * sum_gy_xhat / M) if training
// (the batch statistics depend on x), else gx = w * invstd * gy. gy, gx: x's dtype, [M, C]
// contiguous; w = 1 when weight is undefined.
extern DispatchStub<void(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                         const Tensor& weight, bool training, const Tensor& gx, const Tensor& sum_gy,
                         const Tensor& sum_gy_xhat)>
    batch_norm_backward_stub;

// batch_norm_relu: the forward with relu applied before the one rounding (relu's bits: v where
// v > 0, NaN stays NaN, else +0); the backward with gy passed where relu's output y > 0 and
// +0 elsewhere (relu's backward) before everything batch_norm_backward does. The backward
// recomputes y from x, mean, invstd, weight and bias with the forward's operations (the same
// bits, so the same mask): it reads x, which it needs anyway, instead of y as well. A backend
// without them gets relu(batch_norm(x)) composed.
extern DispatchStub<void(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                         const Tensor& bias, const Tensor& y)>
    batch_norm_relu_forward_stub;
extern DispatchStub<void(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                         const Tensor& weight, const Tensor& bias, bool training, const Tensor& gx,
                         const Tensor& sum_gy, const Tensor& sum_gy_xhat)>
    batch_norm_relu_backward_stub;

}  // namespace hg
