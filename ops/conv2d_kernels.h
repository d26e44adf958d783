// The kernel interface of 2-D convolution, implemented by every backend: forward and
// the two gradients of conv2d (conv_transpose2d is written in terms of the same three).
// Tensors are NHWC / [K, R, S, C/groups], contiguous, of one floating dtype.
#pragma once
#include <cstdint>

#include "framework/dispatch.h"
#include "framework/tensor.h"
#include "ops/conv2d.h"  // Conv2dOptions: the op's options are the kernels' parameters

namespace hg {

// Every size comes from the tensors' shapes: x [N, H, W, C], w [K, R, S, C/groups],
// y [N, P, Q, K]. Output position (p, q) reads input rows p*stride - padding + r*dilation
// (likewise columns); reads outside the image are zeros. The output argument is
// overwritten, never accumulated into. reduced-precision operands multiply and
// accumulate in f32 and are rounded once.
// y = conv(x, w) + bias: bias [K] contiguous, of y's dtype, or undefined; it joins the f32
// (f64) sum before the one rounding, as linear's does.
extern DispatchStub<void(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dOptions& p)>
    conv2d_forward_stub;
// gx = d<conv(x, w), gy>/dx + bias  (gx has x's shape; positions no output reads get the
// bias alone). bias [C] as the forward's: it is conv_transpose2d's bias, joining the sum
// before the one rounding; gradients pass an undefined one.
extern DispatchStub<void(const Tensor& gy, const Tensor& w, const Tensor& bias, const Tensor& gx, const Conv2dOptions& p)>
    conv2d_dgrad_stub;
// gw = d<conv(x, w), gy>/dw  (gw has w's shape)
extern DispatchStub<void(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dOptions& p)> conv2d_wgrad_stub;

}  // namespace hg
