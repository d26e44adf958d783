// In-place data movement: fill and copy with dtype conversion (IEEE rounding) between
// tensors of any strides, and across devices. Not recorded by autograd.
#pragma once
#include "framework/tensor.h"

namespace hg {

void fill_(const Tensor& t, double value);
// dst = src converted to dst's dtype; src broadcasts to dst's shape.
void copy_(const Tensor& dst, const Tensor& src);

}  // namespace hg
