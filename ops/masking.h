// Masking ops written over where(): masked_fill and the triangular parts tril/triu.
// They keep x's dtype (a filled value rounds into it once) and pass the gradient
// through the kept elements only.
#pragma once
#include "framework/tensor.h"

namespace hg {

// x with `value` where mask (a bool tensor broadcastable to x) is true; the value must fit
// x's dtype (fits_dtype: -1e9 does not fit f16; use -65504 or -INFINITY), as in PyTorch.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// The lower (tril) or upper (triu) triangle of the last two axes: element (i, j) is
// kept when j - i <= k (tril) or j - i >= k (triu), zero otherwise.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);
// The bool [rows, cols] mask of tril (lower = true) or triu, on `device`.
Tensor triangle_mask(int64_t rows, int64_t cols, int64_t k, bool lower, Device device = Device::cpu());

}  // namespace hg
