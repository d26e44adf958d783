// 2-D convolution on NHWC images (the `lower` class). Weights are [K, R, S, C/groups]
// for conv2d and [C_in, R, S, C_out/groups] for conv_transpose2d.
#pragma once
#include <array>

#include "framework/tensor.h"

namespace hg {

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

// x [N, H, W, C], w [K, R, S, C/groups], bias [K] or undefined -> [N, P, Q, K].
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), const Conv2dOptions& o = {});

struct ConvTranspose2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> output_padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

// x [N, H, W, C_in], w [C_in, R, S, C_out/groups], bias [C_out] or undefined ->
// [N, (H-1)s - 2p + d(R-1) + op + 1, ..., C_out]: the gradient of conv2d w.r.t. its input.
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(),
                        const ConvTranspose2dOptions& o = {});

}  // namespace hg
