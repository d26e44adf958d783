// upsample: checks, forward and backward side by side. Upsampling is `follow`: it
// runs in the input's dtype.
#include "ops/upsample.h"

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/upsample_kernels.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&, int64_t, UpsampleMode)> upsample_stub("upsample");
DispatchStub<void(const Tensor&, const Tensor&, int64_t, UpsampleMode)> upsample_backward_stub("upsample_backward");

Tensor upsample(const Tensor& x0, int64_t scale, UpsampleMode mode) {
  Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  HG_CHECK(x.defined(), "upsample: undefined input");
  HG_CHECK(x.dim() == 4, "upsample: expected a 4-D NHWC input [N, H, W, C], got ", shape_str(x.shape()));
  HG_CHECK(is_floating(x.dtype()), "upsample: expected a floating input (f64, f32, f16, bf16), got ",
           dtype_name(x.dtype()));
  HG_CHECK(scale >= 1, "upsample: scale must be an integer >= 1, got ", scale);
  const Shape in = x.shape();
  Tensor y = empty({in[0], in[1] * scale, in[2] * scale, in[3]}, {x.dtype(), x.device()});
  if (y.numel()) upsample_stub(x.device(), x.detach().contiguous(), y, scale, mode);
  autograd::record("upsample", {x}, y, [in, scale, mode](const Tensor& gy) {
    Tensor gx = empty(in, {gy.dtype(), gy.device()});
    if (gx.numel()) upsample_backward_stub(gy.device(), gy.contiguous(), gx, scale, mode);
    return TensorList{gx};
  });
  return y;
}

}  // namespace hg
