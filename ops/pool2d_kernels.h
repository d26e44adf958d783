// The kernel interface of 2-D pooling on NHWC images, implemented by every backend.
// Every tensor arrives contiguous; the geometry has been checked by the op.
#pragma once
#include <cstdint>

#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// x [N, H, W, C] pooled by R x S windows at stride (sh, sw), padding (ph, pw) -> [N, P, Q, C].
struct Pool2dGeometry {
  int64_t N, H, W, C;
  int64_t R, S;
  int64_t sh, sw;
  int64_t ph, pw;
  int64_t P, Q;
};

// Window p's input rows [begin, end) (likewise columns) clipped to the image of `size` rows:
// padding holds no data. constexpr, as below, so cuda kernels call it too.
struct WindowSpan {
  int64_t begin, end;
};
constexpr WindowSpan window_span(int64_t p, int64_t kernel, int64_t stride, int64_t pad, int64_t size) {
  const int64_t start = p * stride - pad;
  return {start > 0 ? start : 0, start + kernel < size ? start + kernel : size};
}

// Whether max pooling's running maximum `best` gives way to `a`: a larger value or a NaN
// (NaN wins, as in PyTorch; so does the first element when all are -inf).
template <class C>
constexpr bool max_pool_takes(C a, C best) {
  return a > best || a != a;
}

// The output rows [lo, hi) whose windows cover input row h (likewise for columns):
// window p spans input rows [p*sh - ph, p*sh - ph + R). constexpr so cuda kernels call it.
struct WindowRange {
  int64_t lo, hi;
};
constexpr WindowRange windows_covering(int64_t h, int64_t kernel, int64_t stride, int64_t pad, int64_t out) {
  const int64_t first = h + pad - kernel + 1;  // the lowest window start that still reaches h
  const int64_t lo = first > 0 ? (first + stride - 1) / stride : 0;
  const int64_t hi = (h + pad) / stride + 1;
  return {lo, hi < out ? hi : out};
}

// y = the window maxima (NaN wins, padding never does); argmax (i64, [N, P, Q, C]) =
// h * W + w of the chosen input element within its channel's plane; undefined when
// no gradient is needed.
extern DispatchStub<void(const Tensor& x, const Tensor& y, const Tensor& argmax, const Pool2dGeometry& g)>
    max_pool2d_stub;
// grad_x = the sum of the grad_y entries whose argmax names each input element.
extern DispatchStub<void(const Tensor& grad_y, const Tensor& argmax, const Tensor& grad_x, const Pool2dGeometry& g)>
    max_pool2d_backward_stub;
// y = the window sums divided by R * S (padding counts as zeros).
extern DispatchStub<void(const Tensor& x, const Tensor& y, const Pool2dGeometry& g)> avg_pool2d_stub;
extern DispatchStub<void(const Tensor& grad_y, const Tensor& grad_x, const Pool2dGeometry& g)>
    avg_pool2d_backward_stub;

}  // namespace hg
