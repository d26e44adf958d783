// index_select, gather and embedding: checks, the [outer, n, inner] views the gather
// kernel works on, and the backward (a scatter-add in f32, rounded once).
#include "ops/index.h"

#include "framework/autograd.h"
#include "framework/precision.h"
#include "framework/saved_tensor.h"
#include "ops/index_kernels.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const char*)> gather_stub("gather");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&)> scatter_add_stub("scatter_add");

void index_out_of_range(const char* op, int64_t j, int64_t n) {
  throw Error(detail::concat(op, ": index ", j, " is out of range for an axis of size ", n, " (valid: 0 to ", n - 1,
                             "; negative indices are not wrapped)"));
}

namespace {

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

void check_index(const char* op, const Tensor& x, const Tensor& index) {
  HG_CHECK(x.defined() && index.defined(), op, ": undefined tensor");
  HG_CHECK(index.dtype() == i64, op, ": indices must be an i64 tensor, got ", dtype_name(index.dtype()),
           shape_str(index.shape()));
  HG_CHECK(x.device() == index.device(), op, ": the tensor is on ", x.device().str(), " but the indices are on ",
           index.device().str());
  require_kernel(gather_stub, x.device(), op);
}

// y = x gathered along the middle axis of [outer, n, inner] by idx3 ([outer, m, inner],
// any strides); records `op` whose backward scatters the gradient back.
Tensor gather3(const char* op, const Tensor& x, const Shape& x3, const Tensor& idx3, const Shape& y_shape) {
  const Shape ys3 = idx3.shape();
  Tensor y3 = empty(ys3, {x.dtype(), x.device()});
  if (y3.numel()) gather_stub(x.device(), x.detach().contiguous().view(x3), idx3, y3, op);
  Tensor y = y3.view(y_shape);
  autograd::record(op, {x}, y, [idx = SavedTensor::other(idx3, "indices"), x3, ys3, shape = x.shape(),
                               dt = x.dtype()](const Tensor& g) {
    Tensor acc = zeros(x3, {dt == f64 ? f64 : f32, g.device()});
    if (g.numel()) scatter_add_stub(g.device(), g.to(dt).contiguous().view(ys3), idx.unpack(), acc);
    return TensorList{acc.to(dt).view(shape)};
  });
  return y;
}

}  // namespace

Tensor index_select(const Tensor& x0, int64_t axis, const Tensor& index) {
  check_index("index_select", x0, index);
  const Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  HG_CHECK(x.dim() >= 1, "index_select: expected a tensor with at least one axis, got a 0-d tensor");
  HG_CHECK(index.dim() <= 1, "index_select: indices must be 0-d or 1-d, got ", shape_str(index.shape()));
  const size_t a = static_cast<size_t>(normalize_axis(axis, x.dim(), "index_select"));
  const Shape& s = x.shape();
  const int64_t outer = prod(s, 0, a), inner = prod(s, a + 1, s.size()), m = index.numel();
  Shape ys = s;
  ys[a] = m;
  const Tensor idx3 = index.reshape({1, m, 1}).expand({outer, m, inner});
  return gather3("index_select", x, {outer, s[a], inner}, idx3, ys);
}

Tensor gather(const Tensor& x0, int64_t axis, const Tensor& index) {
  check_index("gather", x0, index);
  Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  HG_CHECK(index.dim() == x.dim(), "gather: indices must have the tensor's rank ", x.dim(), ", got ",
           shape_str(index.shape()), " for a tensor ", shape_str(x.shape()));
  const size_t a = static_cast<size_t>(normalize_axis(axis, std::max<int64_t>(x.dim(), 1), "gather"));
  if (x.dim() == 0) return gather3("gather", x, {1, 1, 1}, index.reshape({1, 1, 1}), {});
  // Away from `axis` only the first index.size(d) slices take part: a narrowed view of x
  // (its backward pads the gradient with zeros).
  for (size_t d = 0; d < index.shape().size(); ++d) {
    if (d == a) continue;
    HG_CHECK(index.shape()[d] <= x.shape()[d], "gather: indices ", shape_str(index.shape()),
             " are larger than the tensor ", shape_str(x.shape()), " on axis ", d, " (only axis ", a,
             " may differ freely)");
    if (index.shape()[d] < x.shape()[d]) x = x.narrow(static_cast<int64_t>(d), 0, index.shape()[d]);
  }
  const Shape& s = x.shape();
  const int64_t outer = prod(s, 0, a), inner = prod(s, a + 1, s.size());
  const Tensor idx3 = index.contiguous().view({outer, index.shape()[a], inner});
  return gather3("gather", x, {outer, s[a], inner}, idx3, index.shape());
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  HG_CHECK(weight.defined() && indices.defined(), "embedding: undefined tensor");
  HG_CHECK(weight.dim() == 2, "embedding: the weight must be [num_embeddings, embedding_dim], got ",
           shape_str(weight.shape()));
  Shape ys = indices.shape();
  ys.push_back(weight.size(1));
  return index_select(weight, 0, indices.reshape({indices.numel()})).view(ys);
}

}  // namespace hg
