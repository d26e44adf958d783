// layer_norm written over the elementwise and reduction primitives, all in f32 (f64 for
// f64) on a widened copy of x, so every backend that has them runs it, and an f16
// input is rounded once, at the end.
#include "ops/normalization.h"

#include <vector>

#include "framework/precision.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace hg {

Tensor layer_norm(const Tensor& x0, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  HG_CHECK(x0.defined(), "layer_norm: undefined tensor");
  const Tensor x = autocast(PrecisionClass::fp32, {x0})[0];
  HG_CHECK(is_floating(x.dtype()), "layer_norm: expected a floating tensor (f64, f32, f16, bf16), got ",
           dtype_name(x.dtype()), shape_str(x.shape()));
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  const bool trailing = k >= 1 && k <= x.dim() &&
                        Shape(x.shape().end() - k, x.shape().end()) == normalized_shape;
  HG_CHECK(trailing, "layer_norm: normalized_shape ", shape_str(normalized_shape),
           " must be non-empty and equal the last axes of the input ", shape_str(x.shape()));
  HG_CHECK(eps >= 0, "layer_norm: eps must be non-negative, got ", eps);
  for (const Tensor* p : {&weight, &bias})
    if (p->defined())
      HG_CHECK(p->shape() == normalized_shape && is_floating(p->dtype()) && p->device() == x.device(),
               "layer_norm: ", p == &weight ? "weight" : "bias", " must be a floating tensor of shape ",
               shape_str(normalized_shape), " on ", x.device().str(), ", got ", dtype_name(p->dtype()),
               shape_str(p->shape()), " on ", p->device().str());
  const DType cd = x.dtype() == f64 ? f64 : f32;
  std::vector<int64_t> axes;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) axes.push_back(d);
  const Tensor xc = x.to(cd);
  const Tensor centred = xc - mean(xc, axes, true);
  Tensor y = centred * rsqrt(mean(square(centred), axes, true) + eps);
  if (weight.defined()) y = y * weight.to(cd);
  if (bias.defined()) y = y + bias.to(cd);
  return y.to(x.dtype());
}

}  // namespace hg
