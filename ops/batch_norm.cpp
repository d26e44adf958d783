// batch_norm: checks, the running-statistics update, and forward and backward around the
// kernels of batch_norm_kernels.h. It is an fp32-class op whose kernels compute in f32
// (f64 for f64) whatever the input dtypes, so autocast has nothing to cast for it.
#include "ops/batch_norm.h"

#include <cmath>

#include "framework/autograd.h"
#include "ops/batch_norm_kernels.h"
#include "ops/activation.h"
#include "ops/copy.h"
#include "ops/elementwise.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&, const Tensor&)> batch_norm_stats_stub("batch_norm_stats");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    batch_norm_forward_stub("batch_norm_forward");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, const Tensor&,
                  const Tensor&, const Tensor&)>
    batch_norm_backward_stub("batch_norm_backward");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    batch_norm_relu_forward_stub("batch_norm_relu_forward");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool,
                  const Tensor&, const Tensor&, const Tensor&)>
    batch_norm_relu_backward_stub("batch_norm_relu_backward");

namespace {

void check_channel_vector(const char* what, const Tensor& t, const Tensor& x, int64_t C) {
  if (!t.defined()) return;
  HG_CHECK(is_floating(t.dtype()), "batch_norm: ", what, " must be floating (f64, f32, f16, bf16), got ",
           dtype_name(t.dtype()));
  HG_CHECK(t.device() == x.device(), "batch_norm: ", what, " is on ", t.device(), " but x is on ", x.device());
  HG_CHECK(t.dim() == 1 && t.size(0) == C, "batch_norm: ", what, " has shape ", shape_str(t.shape()), " but x ",
           shape_str(x.shape()), " has ", C, " channels in its last axis; expected [", C, "]");
}

// t as a contiguous [C] tensor of the statistics dtype; shares t's storage when it can.
Tensor as_stat(const Tensor& t, DType s) { return t.defined() ? t.detach().to(s).contiguous() : Tensor(); }

// A private copy: the running statistics may change in place before backward runs.
Tensor stat_copy(const Tensor& t, DType s) {
  Tensor c = empty(t.shape(), {s, t.device()});
  copy_(c, t.detach());
  return c;
}

// r = (1 - momentum) r + momentum * stat, computed in the wider of the two dtypes (f64
// running statistics of an f32 model keep their precision), rounded into r. A channel
// whose batch statistic is not finite keeps its value: one NaN/inf batch (a step the
// loss scaler skips) would otherwise poison eval mode for good.
void update_running(const Tensor& r, const Tensor& stat, double momentum) {
  const DType d = promote_types(r.dtype(), stat.dtype());
  const Tensor old = r.detach().to(d);
  copy_(r, where(isfinite(stat), old * (1.0 - momentum) + stat.to(d) * momentum, old));
}

// batch_norm, and with `relu` batch_norm_relu (the device has its kernels).
Tensor batch_norm_op(const Tensor& x0, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                     const Tensor& running_var, bool training, double momentum, double eps, bool relu) {
  HG_CHECK(x0.defined(), "batch_norm: x is undefined");
  const DType S = visit_floating(x0.dtype(), "batch_norm", []<typename T>() { return dtype_v<accum_t<T>>; });
  HG_CHECK(x0.dim() >= 2, "batch_norm: x must be channels-last [..., C] with at least 2 dimensions, got ",
           shape_str(x0.shape()));
  const Shape xshape = x0.shape();
  const int64_t C = xshape.back(), M = numel_of(Shape(xshape.begin(), xshape.end() - 1));
  check_channel_vector("weight", weight, x0, C);
  check_channel_vector("bias", bias, x0, C);
  check_channel_vector("running_mean", running_mean, x0, C);
  check_channel_vector("running_var", running_var, x0, C);
  HG_CHECK(running_mean.defined() == running_var.defined(),
           "batch_norm: running_mean and running_var must be given together (got only ",
           running_mean.defined() ? "running_mean" : "running_var", ")");
  HG_CHECK(training || running_mean.defined(),
           "batch_norm: eval mode (training = false) normalises with running_mean and running_var, "
           "but they are undefined");
  HG_CHECK(momentum >= 0 && momentum <= 1, "batch_norm: momentum must be in [0, 1], got ", momentum);
  HG_CHECK(eps > 0 && std::isfinite(eps), "batch_norm: eps must be finite and > 0, got ", eps);
  HG_CHECK(!training || M > 1, "batch_norm: expected more than 1 value per channel when training, got x of shape ",
           shape_str(xshape), " (", M, " value", M == 1 ? "" : "s", " per channel)");

  const Device dev = x0.device();
  const Tensor x = x0.contiguous();
  const Tensor x2 = x.detach().view({M, C});
  const Tensor w = as_stat(weight, S), b = as_stat(bias, S);
  Tensor mean, invstd;
  Tensor y = empty(xshape, {x.dtype(), dev});
  {
    NoGrad no_grad;
    if (training) {
      mean = empty({C}, {S, dev});
      Tensor var = empty({C}, {S, dev});
      if (C > 0) batch_norm_stats_stub(dev, x2, mean, var);
      invstd = rsqrt(var + eps);
      if (running_mean.defined()) {
        update_running(running_mean, mean, momentum);
        // PyTorch tracks the unbiased variance.
        update_running(running_var, var * (static_cast<double>(M) / static_cast<double>(M - 1)), momentum);
      }
    } else {
      mean = stat_copy(running_mean, S);
      invstd = rsqrt(running_var.detach().to(S) + eps);
    }
    if (y.numel() > 0)
      (relu ? batch_norm_relu_forward_stub : batch_norm_forward_stub)(dev, x2, mean, invstd, w, b, y.view({M, C}));
  }

  const DType wdt = weight.defined() ? weight.dtype() : S, bdt = bias.defined() ? bias.dtype() : S;
  // The bias, for relu's mask: the backward recomputes relu's output from x.
  SavedTensor b_saved = relu ? SavedTensor::input(b, 2) : SavedTensor();
  autograd::record(relu ? "batch_norm_relu" : "batch_norm", {x, weight, bias}, y,
                   [x_saved = SavedTensor::input(x2, 0), w_saved = SavedTensor::input(w, 1), b_saved, mean, invstd,
                    training, relu, xshape, wdt, bdt](const Tensor& g) {
    const Tensor &x2 = x_saved.unpack(), &w = w_saved.unpack();
    const int64_t M = x2.size(0), C = x2.size(1);
    const Tensor gy = g.to(x2.dtype()).contiguous().view({M, C});
    Tensor gx = autograd::needs_input_grad(0) ? empty({M, C}, {x2.dtype(), x2.device()}) : Tensor();
    Tensor sum_gy = zeros({C}, {mean.dtype(), x2.device()}), sum_gy_xhat = zeros({C}, {mean.dtype(), x2.device()});
    if (M * C > 0 && relu)
      batch_norm_relu_backward_stub(x2.device(), gy, x2, mean, invstd, w, b_saved.unpack(), training, gx, sum_gy,
                                    sum_gy_xhat);
    else if (M * C > 0)
      batch_norm_backward_stub(x2.device(), gy, x2, mean, invstd, w, training, gx, sum_gy, sum_gy_xhat);
    return TensorList{gx.defined() ? gx.view(xshape) : Tensor(),
                      autograd::needs_input_grad(1) ? sum_gy_xhat.to(wdt) : Tensor(),
                      autograd::needs_input_grad(2) ? sum_gy.to(bdt) : Tensor()};
  });
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  return batch_norm_op(x, weight, bias, running_mean, running_var, training, momentum, eps, false);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum, double eps) {
  if (x.defined() && !(batch_norm_relu_forward_stub.has(x.device().kind) &&
                       batch_norm_relu_backward_stub.has(x.device().kind)))
    return relu(batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps));
  return batch_norm_op(x, weight, bias, running_mean, running_var, training, momentum, eps, true);
}

}  // namespace hg
