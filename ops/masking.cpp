// masked_fill, tril and triu as where() with a mask: no kernel of their own, so they run
// on every device where() runs.
#include "ops/masking.h"

#include <vector>

#include "ops/elementwise.h"

namespace hg {

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  HG_CHECK(x.defined() && mask.defined(), "masked_fill: undefined tensor");
  HG_CHECK(mask.dtype() == b8, "masked_fill: the mask must be a bool tensor, got ", dtype_name(mask.dtype()),
           shape_str(mask.shape()));
  HG_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(), "masked_fill: the mask ",
           shape_str(mask.shape()), " must broadcast to the tensor's shape ", shape_str(x.shape()));
  check_fits_dtype(value, x.dtype(), "masked_fill");  // -1e9 into f16 is refused, as in PyTorch
  return where(mask, full({}, value, {x.dtype(), x.device()}), x);
}

Tensor triangle_mask(int64_t rows, int64_t cols, int64_t k, bool lower, Device device) {
  HG_CHECK(rows >= 0 && cols >= 0, "triangle_mask: sizes must be non-negative, got ", rows, " x ", cols);
  std::vector<double> m(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[static_cast<size_t>(i * cols + j)] = lower ? j - i <= k : j - i >= k;
  return from_vector(m, {rows, cols}, {b8, device});
}

namespace {

Tensor triangle(const char* op, const Tensor& x, int64_t k, bool lower) {
  HG_CHECK(x.defined(), op, ": undefined tensor");
  HG_CHECK(x.dim() >= 2, op, ": expected a tensor with at least 2 axes (a matrix or a batch of them), got ",
           shape_str(x.shape()));
  const Tensor keep = triangle_mask(x.size(-2), x.size(-1), k, lower, x.device());
  return where(keep, x, zeros({}, {x.dtype(), x.device()}));
}

}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return triangle("tril", x, k, true); }
Tensor triu(const Tensor& x, int64_t k) { return triangle("triu", x, k, false); }

}  // namespace hg
