// Ordering ops: sort, argsort, topk (values differentiable through gather, the
// `follow` class) and randperm (a permutation from a generator, the same on every device).
#pragma once
#include "framework/generator.h"
#include "framework/tensor.h"

namespace hg {

struct SortResult {
  Tensor values;   // x's dtype
  Tensor indices;  // i64: where each value sits in x along the axis
};

// Stable: equal values keep their order. NaN counts as the largest value.
SortResult sort(const Tensor& x, int64_t axis = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t axis = -1, bool descending = false);
// The k largest (or smallest) values along `axis`, in order, with their indices.
SortResult topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true);
// A random permutation of 0 .. n-1 (i64 unless o.dtype says otherwise), drawn from `gen`
// (the default generator if null): the order that sorts n uniform f64 draws.
Tensor randperm(int64_t n, TensorOptions o = {i64}, Generator* gen = nullptr);

}  // namespace hg
