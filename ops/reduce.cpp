// Reductions: axis checks, output shapes, and their gradients.
#include "ops/reduce.h"

#include <algorithm>

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/elementwise.h"
#include "ops/reduce_kernels.h"

namespace hg {

DispatchStub<void(ReduceOp, const Tensor&, const Tensor&)> reduce_stub("reduce");
DispatchStub<void(const Tensor&, int64_t, const Tensor&)> argmax_stub("argmax");

namespace {

// Which axes are reduced, as a flag per dimension.
std::vector<bool> reduced_axes(const Tensor& x, const std::vector<int64_t>& axes, const char* op) {
  std::vector<bool> r(static_cast<size_t>(x.dim()), axes.empty());
  for (int64_t a : axes) {
    int64_t n = normalize_axis(a, x.dim(), op);
    HG_CHECK(x.dim() > 0, op, ": cannot reduce over axis ", a, " of a 0-d tensor");
    HG_CHECK(!r[static_cast<size_t>(n)], op, ": axis ", a, " is listed twice");
    r[static_cast<size_t>(n)] = true;
  }
  return r;
}

Shape kept_shape(const Tensor& x, const std::vector<bool>& r) {
  Shape s = x.shape();
  for (size_t i = 0; i < s.size(); ++i)
    if (r[i]) s[i] = 1;
  return s;
}

Shape dropped_shape(const Tensor& x, const std::vector<bool>& r) {
  Shape s;
  for (size_t i = 0; i < r.size(); ++i)
    if (!r[i]) s.push_back(x.shape()[i]);
  return s;
}

Tensor reduce_raw(ReduceOp op, const Tensor& x, const std::vector<bool>& r, const char* name) {
  Shape ks = kept_shape(x, r);
  for (size_t i = 0; i < r.size(); ++i)
    HG_CHECK(!(r[i] && x.shape()[i] == 0) || op == ReduceOp::sum, name, ": cannot reduce an empty axis ", i,
             " of shape ", shape_str(x.shape()));
  Tensor out = empty(ks, {x.dtype(), x.device()});
  if (out.numel()) reduce_stub(x.device(), op, x, out);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x0, const std::vector<int64_t>& axes, bool keepdim) {
  const Tensor x = autocast(PrecisionClass::fp32, {x0})[0];
  auto r = reduced_axes(x, axes, "sum");
  Tensor k = reduce_raw(ReduceOp::sum, x, r, "sum");
  Tensor y = keepdim ? k : k.detach().view(dropped_shape(x, r));
  autograd::record("sum", {x}, y, [xs = x.shape(), ks = k.shape()](const Tensor& g) {
    return TensorList{g.reshape(ks).expand(xs).contiguous()};
  });
  return y;
}

Tensor mean(const Tensor& x0, const std::vector<int64_t>& axes, bool keepdim) {
  const Tensor x = autocast(PrecisionClass::fp32, {x0})[0];
  auto r = reduced_axes(x, axes, "mean");
  Tensor k = reduce_raw(ReduceOp::mean, x, r, "mean");
  Tensor y = keepdim ? k : k.detach().view(dropped_shape(x, r));
  double count = static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(k.numel(), 1));
  autograd::record("mean", {x}, y, [xs = x.shape(), ks = k.shape(), count](const Tensor& g) {
    return TensorList{div(g.reshape(ks), count).expand(xs).contiguous()};
  });
  return y;
}

namespace {
// max/min: the gradient goes to the elements equal to the result, split evenly on ties.
Tensor extreme(const char* name, ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  auto r = reduced_axes(x, axes, name);
  Tensor k = reduce_raw(op, x, r, name);
  Tensor y = keepdim ? k : k.detach().view(dropped_shape(x, r));
  autograd::record(name, {x}, y,
                   [x_saved = SavedTensor::input(x, 0), k_saved = SavedTensor::output(k), r](const Tensor& g) {
    const Tensor &x = x_saved.unpack(), &k = k_saved.unpack();
    Tensor hit = where(eq(x, k), ones_like(x), zeros_like(x));
    std::vector<int64_t> ax;
    for (size_t i = 0; i < r.size(); ++i)
      if (r[i]) ax.push_back(static_cast<int64_t>(i));
    Tensor cnt = sum(hit, ax, true);
    return TensorList{g.reshape(k.shape()) * hit / cnt};
  });
  return y;
}
}  // namespace

Tensor max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return extreme("max", ReduceOp::max, x, axes, keepdim);
}
Tensor min(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return extreme("min", ReduceOp::min, x, axes, keepdim);
}

Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) {
  int64_t a = normalize_axis(axis, x.dim(), "argmax");
  HG_CHECK(x.dim() > 0 && x.shape()[static_cast<size_t>(a)] > 0, "argmax: axis ", axis, " of shape ",
           shape_str(x.shape()), " is empty");
  Shape ks = x.shape();
  ks[static_cast<size_t>(a)] = 1;
  Tensor out = empty(ks, {i64, x.device()});
  if (out.numel()) argmax_stub(x.device(), x.detach(), a, out);
  return keepdim ? out : out.squeeze(a);
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  HG_CHECK(lead >= 0, "sum_to: cannot sum shape ", shape_str(g.shape()), " to the larger ", shape_str(shape));
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < g.dim(); ++i)
    if (i < lead || (shape[static_cast<size_t>(i - lead)] == 1 && g.shape()[static_cast<size_t>(i)] != 1))
      axes.push_back(i);
  Tensor s = axes.empty() ? g : sum(g, axes, true);
  return s.reshape(shape);
}

}  // namespace hg
