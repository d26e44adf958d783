// Flatten, Dropout2d and AdaptiveAvgPool2d over existing ops: views, a per-channel
// bernoulli mask, and window means (avg_pool2d when the windows tile the image evenly).
#include "nn/image_layers.h"

#include <vector>

#include "ops/concat.h"
#include "ops/elementwise.h"
#include "ops/pool2d.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace hg::nn {

namespace {

void check_nhwc(const Module& m, const char* what, const Tensor& x) {
  HG_CHECK(x.defined() && x.dim() == 4, m.type_name(), " at '", m.path(), "': expected NHWC input [N, H, W, C]",
           what, ", got ", x.defined() ? shape_str(x.shape()) : "undefined");
}

}  // namespace

Tensor Flatten::forward_impl(const Tensor& x) {
  HG_CHECK(x.defined(), "Flatten at '", path(), "': undefined input");
  return x.flatten(start_axis, end_axis);
}

Dropout2d::Dropout2d(double p_) : p(p_) { HG_CHECK(p_ >= 0 && p_ < 1, "Dropout2d: p must be in [0, 1), got ", p_); }

Tensor Dropout2d::forward_impl(const Tensor& x) {
  check_nhwc(*this, "", x);
  if (!is_training() || p == 0 || x.numel() == 0) return x;
  // x * mask is exact (the mask is 0 or 1), so the output rounds once, at the scaling.
  const Tensor mask = bernoulli({x.size(0), 1, 1, x.size(3)}, 1.0 - p, x.device()).to(x.dtype());
  return (x * mask) * (1.0 / (1.0 - p));
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(int64_t h, int64_t w) : out_h(h), out_w(w) {
  HG_CHECK(h > 0 && w > 0, "AdaptiveAvgPool2d: output sizes must be positive, got ", h, " x ", w);
}

Tensor AdaptiveAvgPool2d::forward_impl(const Tensor& x) {
  check_nhwc(*this, " with H, W > 0", x);
  const int64_t H = x.size(1), W = x.size(2);
  HG_CHECK(H > 0 && W > 0, "AdaptiveAvgPool2d at '", path(), "': empty image ", shape_str(x.shape()));
  if (H % out_h == 0 && W % out_w == 0)
    return avg_pool2d(x, {.kernel = {H / out_h, W / out_w}, .stride = {H / out_h, W / out_w}});
  // Uneven windows overlap: one mean per output cell, in f32, rounded once to x's dtype.
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < out_h; ++i) {
    const int64_t h0 = i * H / out_h, h1 = ((i + 1) * H + out_h - 1) / out_h;
    std::vector<Tensor> cells;
    for (int64_t j = 0; j < out_w; ++j) {
      const int64_t w0 = j * W / out_w, w1 = ((j + 1) * W + out_w - 1) / out_w;
      cells.push_back(mean(x.slice(1, h0, h1).slice(2, w0, w1).to(x.dtype() == f64 ? f64 : f32), {1, 2}));
    }
    rows.push_back(stack(cells, 1));
  }
  return stack(rows, 1).to(x.dtype());
}

}  // namespace hg::nn
