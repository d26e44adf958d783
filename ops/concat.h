// Joining and splitting tensors along an axis (the `promote` class for cat/stack).
#pragma once
#include <vector>

#include "framework/tensor.h"

namespace hg {

Tensor cat(const std::vector<Tensor>& tensors, int64_t axis);
Tensor stack(const std::vector<Tensor>& tensors, int64_t axis);
// Pieces of `size` along axis (the last may be smaller); views of x.
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t axis);
// n pieces of (nearly) equal size along axis; views of x.
std::vector<Tensor> chunk(const Tensor& x, int64_t n, int64_t axis);

}  // namespace hg
