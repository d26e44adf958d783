// max_pool2d and avg_pool2d: geometry checks (PyTorch's floor output size), forward and
// backward side by side. Pooling is `follow`: it runs in the input's dtype.
#include "ops/pool2d.h"

#include <cstdint>

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/pool2d_kernels.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Pool2dGeometry&)> max_pool2d_stub("max_pool2d");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Pool2dGeometry&)> max_pool2d_backward_stub(
    "max_pool2d_backward");
DispatchStub<void(const Tensor&, const Tensor&, const Pool2dGeometry&)> avg_pool2d_stub("avg_pool2d");
DispatchStub<void(const Tensor&, const Tensor&, const Pool2dGeometry&)> avg_pool2d_backward_stub(
    "avg_pool2d_backward");

namespace {

Pool2dGeometry geometry(const char* op, const Tensor& x, const Pool2dOptions& o) {
  HG_CHECK(x.defined(), op, ": undefined input");
  HG_CHECK(x.dim() == 4, op, ": expected a 4-D NHWC input [N, H, W, C], got ", shape_str(x.shape()));
  HG_CHECK(x.size(1) > 0 && x.size(2) > 0, op, ": input ", shape_str(x.shape()),
           " has an empty spatial axis (H and W must be at least 1)");
  HG_CHECK(is_floating(x.dtype()), op, ": expected a floating input (f64, f32, f16, bf16), got ",
           dtype_name(x.dtype()));
  const auto [R, S] = o.kernel;
  HG_CHECK(R > 0 && S > 0, op, ": kernel must be positive, got ", R, "x", S);
  const int64_t sh = o.stride[0] == 0 ? R : o.stride[0], sw = o.stride[1] == 0 ? S : o.stride[1];
  HG_CHECK(sh > 0 && sw > 0, op, ": stride must be positive (or 0 for the kernel size), got ", o.stride[0], "x",
           o.stride[1]);
  const auto [ph, pw] = o.padding;
  HG_CHECK(ph >= 0 && pw >= 0 && 2 * ph <= R && 2 * pw <= S, op, ": padding ", ph, "x", pw,
           " must be non-negative and at most half the kernel ", R, "x", S);
  const int64_t H = x.size(1), W = x.size(2);
  HG_CHECK(R <= H + 2 * ph && S <= W + 2 * pw, op, ": kernel ", R, "x", S, " is larger than the padded input ",
           H + 2 * ph, "x", W + 2 * pw, " (input ", shape_str(x.shape()), ", padding ", ph, "x", pw, ")");
  return {x.size(0), H, W, x.size(3), R, S, sh, sw, ph, pw, (H + 2 * ph - R) / sh + 1, (W + 2 * pw - S) / sw + 1};
}

TensorOptions like(const Tensor& x, DType dt) { return {dt, x.device()}; }

}  // namespace

Tensor max_pool2d(const Tensor& x0, const Pool2dOptions& o) {
  Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  const Pool2dGeometry g = geometry("max_pool2d", x, o);
  HG_CHECK(g.H * g.W <= INT32_MAX, "max_pool2d: an image plane of ", g.H, "x", g.W,
           " elements is too large; the kernels index a plane with 32 bits");
  Tensor y = empty({g.N, g.P, g.Q, g.C}, like(x, x.dtype()));
  // The argmax is only kept when a backward may need it.
  Tensor argmax = autograd::needs_record({&x}) ? empty(y.shape(), like(x, i64)) : Tensor();
  if (y.numel()) max_pool2d_stub(x.device(), x.detach().contiguous(), y, argmax, g);
  autograd::record("max_pool2d", {x}, y, [argmax, g, dt = x.dtype()](const Tensor& gy) {
    Tensor gx = empty({g.N, g.H, g.W, g.C}, like(gy, dt));
    if (gx.numel()) max_pool2d_backward_stub(gy.device(), gy.contiguous(), argmax, gx, g);
    return TensorList{gx};
  });
  return y;
}

Tensor avg_pool2d(const Tensor& x0, const Pool2dOptions& o) {
  Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  const Pool2dGeometry g = geometry("avg_pool2d", x, o);
  Tensor y = empty({g.N, g.P, g.Q, g.C}, like(x, x.dtype()));
  if (y.numel()) avg_pool2d_stub(x.device(), x.detach().contiguous(), y, g);
  autograd::record("avg_pool2d", {x}, y, [g, dt = x.dtype()](const Tensor& gy) {
    Tensor gx = empty({g.N, g.H, g.W, g.C}, like(gy, dt));
    if (gx.numel()) avg_pool2d_backward_stub(gy.device(), gy.contiguous(), gx, g);
    return TensorList{gx};
  });
  return y;
}

}  // namespace hg
