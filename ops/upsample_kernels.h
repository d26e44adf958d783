// The kernel interface of integer-factor upsampling on NHWC images, implemented by
// every backend, plus the source-index rule both directions and all backends share.
#pragma once
#include <cstdint>

#include "framework/dispatch.h"
#include "framework/tensor.h"
#include "ops/upsample.h"

namespace hg {

// Output index o of a linear resize reads inputs i0 and i1 with weights w0 and w1.
template <class F>
struct LinearTap {
  int64_t i0, i1;
  F w0, w1;
};

// Half-pixel centres (align_corners=false): o maps to (o + 0.5) / scale - 0.5, clamped
// at 0 below and by repeating the last input above, as PyTorch does. F is the compute type.
// constexpr so that cuda kernels call it too.
template <class F>
constexpr LinearTap<F> linear_tap(int64_t o, int64_t scale, int64_t in_size) {
  F src = (static_cast<F>(o) + F(0.5)) / static_cast<F>(scale) - F(0.5);
  if (src < F(0)) src = F(0);
  const int64_t i0 = static_cast<int64_t>(src);
  const F w1 = src - static_cast<F>(i0);
  return {i0, i0 + (i0 < in_size - 1 ? 1 : 0), F(1) - w1, w1};
}

// x [N, H, W, C] -> y [N, H*scale, W*scale, C]; both contiguous.
extern DispatchStub<void(const Tensor& x, const Tensor& y, int64_t scale, UpsampleMode mode)> upsample_stub;
// grad_x = the transpose of the interpolation applied to grad_y, summed in f32 (f64 for f64).
extern DispatchStub<void(const Tensor& grad_y, const Tensor& grad_x, int64_t scale, UpsampleMode mode)>
    upsample_backward_stub;

}  // namespace hg
