// SyncBatchNorm's training forward and its recorded backward: statistics in f64 over all
// ranks' elements, normalisation in f32, output in the input's dtype.
#include "dist/sync_batch_norm.h"

#include "framework/autograd.h"
#include "ops/concat.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace hg::dist {

namespace {

// [s; t] all-reduced (sum) as one message; returns the two halves.
std::pair<Tensor, Tensor> all_reduce_pair(ProcessGroup& pg, const Tensor& s, const Tensor& t) {
  Tensor both = cat({s, t}, 0).contiguous();
  pg.all_reduce(both, ReduceOp::sum);
  const int64_t c = s.size(0);
  return {both.narrow(0, 0, c), both.narrow(0, c, c)};
}

// dL/dx given dy: the sums of dy and dy * x_hat are the global batch's, so every rank's
// input gradient includes what the other ranks' losses say through the shared statistics.
// Returns {dx, dweight, dbias}; the parameter gradients are this rank's (DDP averages them).
TensorList sync_batch_norm_backward(ProcessGroup& pg, const Tensor& grad, const Tensor& xhat, const Tensor& invstd,
                                    const Tensor& weight, double m, DType x_dtype) {
  const int64_t c = xhat.size(1);
  Tensor dy = grad.to(f32).reshape({-1, c});
  Tensor dbias = sum(dy, {0}), dweight = sum(dy * xhat, {0});
  auto [gsum, gsum_xhat] = all_reduce_pair(pg, dbias, dweight);
  Tensor dx = (dy - gsum / m - xhat * (gsum_xhat / m)) * (invstd * weight.to(f32));
  return {dx.to(x_dtype).reshape(grad.shape()), dweight.to(weight.dtype()), dbias.to(weight.dtype())};
}

}  // namespace

SyncBatchNorm::SyncBatchNorm(int64_t channels, double eps_, double momentum_, std::shared_ptr<ProcessGroup> group)
    : nn::BatchNorm2d(channels, eps_, momentum_), group_(std::move(group)) {}

Tensor SyncBatchNorm::forward_impl(const Tensor& x) {
  if (!is_training()) return nn::BatchNorm2d::forward_impl(x);
  HG_CHECK(x.defined() && x.dim() == 4 && x.size(3) == channels, "SyncBatchNorm(", channels, ") at '", path(),
           "': expected NHWC input [N, H, W, ", channels, "], got ", x.defined() ? shape_str(x.shape()) : "undefined");
  const std::shared_ptr<ProcessGroup> pg = group_ ? group_ : group_for(x.device());
  Tensor y, xhat, invstd;
  double m = 0;
  {
    NoGrad ng;
    copy_(num_batches_tracked, num_batches_tracked + 1.0);
    Tensor x2 = x.to(f64).reshape({-1, channels});
    Tensor count = from_data<double>({static_cast<double>(x2.size(0))}, {1}).to(x.device());
    pg->all_reduce(count, ReduceOp::sum);
    m = count.item<double>();
    HG_CHECK(m > 1, "SyncBatchNorm(", channels, ") at '", path(), "': the global batch holds ", m,
             " value(s) per channel; training needs more than 1");
    auto [s, ss] = all_reduce_pair(*pg, sum(x2, {0}), sum(x2 * x2, {0}));
    Tensor mu = s / m;
    Tensor var = ss / m - mu * mu;  // in f64 the cancellation costs ~1e-16 relative, not f32's ~1e-7
    invstd = rsqrt(var + eps).to(f32);
    xhat = (x.to(f32).reshape({-1, channels}) - mu.to(f32)) * invstd;
    y = (xhat * weight.to(f32) + bias.to(f32)).to(x.dtype()).reshape(x.shape());
    copy_(running_mean, running_mean * (1 - momentum) + mu.to(running_mean.dtype()) * momentum);
    copy_(running_var, running_var * (1 - momentum) + (var * (m / (m - 1))).to(running_var.dtype()) * momentum);
  }
  autograd::record("sync_batch_norm", {x, weight, bias}, y,
                   [pg, xhat, invstd, w = weight, m, dt = x.dtype()](const Tensor& grad) {
                     return sync_batch_norm_backward(*pg, grad, xhat, invstd, w, m, dt);
                   });
  return y;
}

}  // namespace hg::dist
