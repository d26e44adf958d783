// gelu_tanh over the elementwise primitives on a widened copy of x: every backend runs
// it, and f16/bf16 round once at the end (forward) and at the input's cast (backward).
#include "ops/gelu_tanh.h"

#include <cmath>

#include "framework/precision.h"
#include "ops/activation.h"
#include "ops/elementwise.h"

namespace hg {

Tensor gelu_tanh(const Tensor& x0) {
  HG_CHECK(x0.defined(), "gelu_tanh: undefined tensor");
  const Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  HG_CHECK(is_floating(x.dtype()), "gelu_tanh: expected a floating tensor (f64, f32, f16, bf16), got ",
           dtype_name(x.dtype()), shape_str(x.shape()));
  const Tensor xc = x.to(x.dtype() == f64 ? f64 : f32);
  const double c = std::sqrt(2.0 / M_PI);
  const Tensor inner = (xc + square(xc) * xc * 0.044715) * c;
  return (xc * (tanh(inner) + 1.0) * 0.5).to(x.dtype());
}

}  // namespace hg
