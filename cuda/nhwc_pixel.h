// The coordinates of element i of a contiguous [N, rows, cols, C] tensor, for the NHWC
// kernels that give each thread one element (pooling, upsampling).
#pragma once
#include <cstdint>

#include "framework/host_device.h"

namespace hg::cuda {

struct Pixel {
  int64_t n, row, col, c;
};
HG_HOST_DEVICE Pixel pixel_of(int64_t i, int64_t rows, int64_t cols, int64_t C) {
  return {i / (C * cols * rows), i / (C * cols) % rows, i / C % cols, i % C};
}

}  // namespace hg::cuda
