// Selecting elements by integer index, with autograd: index_select, gather and
// embedding (the `follow` class: they copy values, no arithmetic). The backward adds
// the gradient of repeated indices in f32 and rounds once. Indices are i64.
#pragma once
#include "framework/tensor.h"

namespace hg {

// The slices x[..., index[j], ...] along `axis`; index is 0-d or 1-d.
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
// y[i][j][k] = x[index[i][j][k]][j][k] for axis 0 (and likewise for other axes), as
// torch.gather: index has x's rank and, away from `axis`, sizes no larger than x's.
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);
// Rows of weight [num, dim] for each index: the result has shape index.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& indices);

}  // namespace hg
