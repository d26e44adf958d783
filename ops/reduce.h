// Reductions over axes (sum, mean, max, min; argmax) and sum_to, the gradient of
// broadcasting. They accumulate in f32 (f64 for f64) and round the result once.
#pragma once
#include <vector>

#include "framework/tensor.h"

namespace hg {

// An empty axis list reduces over every axis.
Tensor sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false);  // i64; the first maximum wins
// Sums g over the dimensions that broadcasting expanded, giving `shape`.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace hg
