// pad: constant padding on any axes (the `follow` class). Only the border is filled and
// the input is copied once into the interior; the gradient is the interior's slice.
#include "ops/pad.h"

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/copy.h"

namespace hg {

Tensor pad(const Tensor& x0, const std::vector<int64_t>& before, const std::vector<int64_t>& after, double value) {
  HG_CHECK(x0.defined(), "pad: undefined input");
  Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  const int64_t rank = x.dim();
  HG_CHECK(static_cast<int64_t>(before.size()) == rank && static_cast<int64_t>(after.size()) == rank,
           "pad: expected one entry per axis of the input ", shape_str(x.shape()), " (", rank, "), got ",
           before.size(), " before and ", after.size(), " after");
  Shape out_shape = x.shape();
  for (int64_t d = 0; d < rank; ++d) {
    HG_CHECK(before[d] >= 0 && after[d] >= 0, "pad: amounts must be non-negative, got before[", d, "] = ", before[d],
             " and after[", d, "] = ", after[d], " for input ", shape_str(x.shape()));
    out_shape[d] += before[d] + after[d];
  }
  Tensor y = empty(out_shape, {x.dtype(), x.device()});
  for (int64_t d = 0; d < rank; ++d) {
    if (before[d] > 0) fill_(y.narrow(d, 0, before[d]), value);
    if (after[d] > 0) fill_(y.narrow(d, out_shape[d] - after[d], after[d]), value);
  }
  // The interior: the same shape as x, placed after `before` on every axis.
  auto interior = [before, rank](const Tensor& t, const Shape& inner) {
    Tensor v = t;
    for (int64_t d = 0; d < rank; ++d) v = v.narrow(d, before[d], inner[d]);
    return v;
  };
  copy_(interior(y.detach(), x.shape()), x);
  autograd::record("pad", {x}, y, [interior, inner = x.shape()](const Tensor& g) {
    return TensorList{interior(g, inner)};
  });
  return y;
}

}  // namespace hg
