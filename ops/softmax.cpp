// softmax and log_softmax: checks, the [outer, n, inner] view the kernels work on, and
// the backward, which reuses the saved output (no second exponentiation of x).
#include "ops/softmax.h"

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/softmax_kernels.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&, bool)> softmax_stub("softmax");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, bool)> softmax_backward_stub("softmax_backward");

namespace {

// The shape [outer, n, inner] that puts `axis` in the middle; a 0-d tensor is one row of one.
Shape three_d(const Shape& s, int64_t axis) {
  if (s.empty()) return {1, 1, 1};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  return {outer, s[static_cast<size_t>(axis)], inner};
}

Tensor softmax_impl(const char* name, bool log, const Tensor& x0, int64_t axis) {
  HG_CHECK(x0.defined(), name, ": undefined tensor");
  const Tensor x = autocast(PrecisionClass::fp32, {x0})[0];
  HG_CHECK(is_floating(x.dtype()), name, ": expected a floating tensor (f64, f32, f16, bf16), got ",
           dtype_name(x.dtype()), shape_str(x.shape()));
  const int64_t a = normalize_axis(axis, x.dim(), name);
  const Shape s3 = three_d(x.shape(), a);
  Tensor y3 = empty(s3, {x.dtype(), x.device()});
  if (y3.numel()) softmax_stub(x.device(), x.detach().contiguous().view(s3), y3, log);
  Tensor y = y3.view(x.shape());
  autograd::record(name, {x}, y, [y_saved = SavedTensor::output(y3), log, shape = x.shape()](const Tensor& g) {
    const Tensor& y3 = y_saved.unpack();
    Tensor gx = empty(y3.shape(), {y3.dtype(), y3.device()});
    if (gx.numel())
      softmax_backward_stub(y3.device(), g.to(y3.dtype()).contiguous().view(y3.shape()), y3, gx, log);
    return TensorList{gx.view(shape)};
  });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) { return softmax_impl("softmax", false, x, axis); }
Tensor log_softmax(const Tensor& x, int64_t axis) { return softmax_impl("log_softmax", true, x, axis); }

}  // namespace hg
