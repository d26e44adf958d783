// What the cuda convolution tests share: a case (input and weight shapes, parameters, a
// label) and the output shape it gives.
#pragma once
#include "framework/tensor.h"
#include "ops/conv2d_kernels.h"

namespace hg::test {

struct ConvCase {
  Shape x, w;  // [N, H, W, C], [K, R, S, C/groups]
  Conv2dOptions p;
  const char* what;
};

inline Shape output_shape(const ConvCase& c) {
  const int64_t P = (c.x[1] + 2 * c.p.padding[0] - c.p.dilation[0] * (c.w[1] - 1) - 1) / c.p.stride[0] + 1;
  const int64_t Q = (c.x[2] + 2 * c.p.padding[1] - c.p.dilation[1] * (c.w[2] - 1) - 1) / c.p.stride[1] + 1;
  return {c.x[0], P, Q, c.w[0]};
}

}  // namespace hg::test
