// Losses: argument checks with actionable messages, label validation reported by the
// kernels, and each loss's backward next to its forward. All are of the `fp32` class.
#include "ops/loss.h"

#include <cmath>
#include <string>
#include <vector>

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/loss_kernels.h"
#include "ops/reduce.h"

namespace hg {

DispatchStub<int64_t(const Tensor&, const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&,
                     const Tensor&)>
    cross_entropy_stub("cross_entropy");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&,
                  const Tensor&)>
    cross_entropy_backward_stub("cross_entropy_backward");
DispatchStub<void(PointwiseLoss, const Tensor&, const Tensor&, const Tensor&)> pointwise_loss_stub("pointwise_loss");
DispatchStub<void(PointwiseLoss, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>
    pointwise_loss_backward_stub("pointwise_loss_backward");
DispatchStub<int64_t(const Tensor&, const Tensor&, double, const Tensor&, const Tensor&)> soft_dice_stub("soft_dice");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&)> soft_dice_backward_stub(
    "soft_dice_backward");

namespace {

DType accum_dtype(DType dt) { return dt == f64 ? f64 : f32; }

// Checks scores [..., C] against labels [...] and returns C.
int64_t check_class_inputs(const char* op, const char* what, const Tensor& x, const Tensor& target) {
  HG_CHECK(x.defined() && target.defined(), op, ": undefined ", what, " or target");
  HG_CHECK(is_floating(x.dtype()), op, ": ", what, " must be floating (f64, f32, f16, bf16), got ",
           dtype_name(x.dtype()), shape_str(x.shape()));
  HG_CHECK(x.dim() >= 1, op, ": ", what, " must end in a class axis [..., C], got a 0-d tensor");
  HG_CHECK(target.dtype() == i64, op, ": target must hold i64 class indices, got ", dtype_name(target.dtype()),
           shape_str(target.shape()), "; convert it with .to(i64)");
  HG_CHECK(x.device() == target.device(), op, ": ", what, " on ", x.device(), " but target on ", target.device());
  const Shape lead(x.shape().begin(), x.shape().end() - 1);
  HG_CHECK(target.shape() == lead, op, ": target shape ", shape_str(target.shape()), " does not match ", what, " ",
           shape_str(x.shape()), " without its class axis (expected target shape ", shape_str(lead), ")");
  HG_CHECK(x.size(-1) > 0, op, ": ", what, " ", shape_str(x.shape()), " have no classes");
  return x.size(-1);
}

// Throws for the label a kernel found invalid, naming its value and where it sits.
void throw_bad_label(const char* op, int64_t flat, const Tensor& target, int64_t classes, const std::string& also) {
  const int64_t value = target.detach().reshape({-1}).narrow(0, flat, 1).item<int64_t>();
  Shape index(target.shape().size());
  int64_t rest = flat;
  for (size_t d = index.size(); d-- > 0;) {
    index[d] = rest % target.shape()[d];
    rest /= target.shape()[d];
  }
  throw Error(detail::concat(op, ": target value ", value, " at flat position ", flat, " (index ",
                             shape_str(index), " of target ", shape_str(target.shape()),
                             ") is not a class: valid labels are 0 to ", classes - 1, " for C = ", classes, also));
}

// A NaN or negative weight poisons or flips the loss; all zeros make it 0/0.
void check_class_weights(const Tensor& w) {
  const std::vector<double> v = w.to_vector<double>();
  double total = 0;
  for (size_t c = 0; c < v.size(); ++c) {
    HG_CHECK(std::isfinite(v[c]) && v[c] >= 0, "cross_entropy: class weight ", c, " is ", v[c],
             "; weights must be finite and >= 0");
    total += v[c];
  }
  HG_CHECK(total > 0, "cross_entropy: every class weight is 0, so the weighted mean is 0/0; give at least one "
           "class a positive weight");
}

// bce_with_logits reads targets as probabilities; outside [0, 1] its loss is not a loss
// (it goes below zero without bound). Three reductions, each a host read.
void check_probability_targets(const Tensor& target) {
  NoGrad ng;
  const Tensor t = target.detach();
  if (t.numel() == 0) return;
  const double lo = min(t).item<double>(), hi = max(t).item<double>(), total = sum(t).item<double>();
  HG_CHECK(lo >= 0 && hi <= 1 && std::isfinite(total), "bce_with_logits: targets must be probabilities in [0, 1], "
           "got values from ", lo, " to ", hi, std::isfinite(total) ? "" : " (and NaN or inf)");
}

}  // namespace

Tensor cross_entropy(const Tensor& logits0, const Tensor& target, const CrossEntropyOptions& o) {
  const TensorList in = autocast(PrecisionClass::fp32, {logits0, o.weight});
  const Tensor& logits = in[0];
  const int64_t C = check_class_inputs("cross_entropy", "logits", logits, target);
  const Device dev = logits.device();
  const DType acc = accum_dtype(logits.dtype());
  Tensor w;
  if (in[1].defined()) {
    const Tensor& w0 = in[1];
    HG_CHECK(is_floating(w0.dtype()) && w0.device() == dev, "cross_entropy: weight must be a floating tensor on ",
             dev, ", got ", dtype_name(w0.dtype()), " on ", w0.device());
    HG_CHECK(w0.dim() == 1 && w0.size(0) == C, "cross_entropy: weight has shape ", shape_str(w0.shape()),
             " but logits ", shape_str(logits.shape()), " have ", C, " classes; expected a weight of shape [", C, "]");
    w = w0.detach().to(acc).contiguous();
    check_class_weights(w);
  }
  const int64_t N = target.numel();
  const Tensor x2 = logits.detach().contiguous().view({N, C});
  const Tensor t1 = target.detach().contiguous().view({N});
  Tensor loss = empty({}, {logits.dtype(), dev});
  Tensor lse = empty({N}, {acc, dev}), wsum = empty({}, {acc, dev});
  const int64_t bad = cross_entropy_stub(dev, x2, t1, w, o.ignore_index, loss, lse, wsum);
  if (bad >= 0)
    throw_bad_label("cross_entropy", bad, target, C, detail::concat(" (or ignore_index ", o.ignore_index, ")"));
  autograd::record("cross_entropy", {logits}, loss,
                   [x_saved = SavedTensor::input(x2, 0), t_saved = SavedTensor::other(t1, "target"),
                    w_saved = SavedTensor::other(w, "class weight"), ii = o.ignore_index, lse, wsum,
                    shape = logits.shape()](const Tensor& g) {
                     const Tensor &x2 = x_saved.unpack(), &t1 = t_saved.unpack(), &w = w_saved.unpack();
                     Tensor gx = empty(x2.shape(), {x2.dtype(), x2.device()});
                     cross_entropy_backward_stub(x2.device(), g.to(x2.dtype()), x2, t1, w, ii, lse, wsum, gx);
                     return TensorList{gx.view(shape)};
                   });
  return loss;
}

namespace {

Tensor pointwise_loss(const char* op, PointwiseLoss kind, const Tensor& x0, const Tensor& t0) {
  HG_CHECK(x0.defined() && t0.defined(), op, ": undefined input or target");
  const TensorList in = autocast(PrecisionClass::fp32, {x0, t0});
  HG_CHECK(is_floating(in[0].dtype()), op, ": input must be floating (f64, f32, f16, bf16), got ",
           dtype_name(in[0].dtype()), shape_str(in[0].shape()));
  HG_CHECK(in[0].shape() == in[1].shape(), op, ": input shape ", shape_str(in[0].shape()), " and target shape ",
           shape_str(in[1].shape()), " differ; they must be equal");
  HG_CHECK(in[0].device() == in[1].device(), op, ": input on ", in[0].device(), " but target on ", in[1].device());
  const DType dt = promote_types(in[0].dtype(), in[1].dtype());
  const Tensor x = in[0].to(dt), t = in[1].to(dt);
  const Tensor xc = x.detach().contiguous(), tc = t.detach().contiguous();
  Tensor out = empty({}, {dt, x.device()});
  pointwise_loss_stub(x.device(), kind, xc, tc, out);
  autograd::record(op, {x, t}, out,
                   [kind, x_saved = SavedTensor::input(xc, 0), t_saved = SavedTensor::input(tc, 1)](const Tensor& g) {
    const Tensor &xc = x_saved.unpack(), &tc = t_saved.unpack();
    const TensorOptions opt{xc.dtype(), xc.device()};
    Tensor gx = autograd::needs_input_grad(0) ? empty(xc.shape(), opt) : Tensor();
    Tensor gt = autograd::needs_input_grad(1) ? empty(xc.shape(), opt) : Tensor();
    if (gx.defined() || gt.defined())
      pointwise_loss_backward_stub(xc.device(), kind, g.to(xc.dtype()), xc, tc, gx, gt);
    return TensorList{gx, gt};
  });
  return out;
}

}  // namespace

Tensor bce_with_logits(const Tensor& logits, const Tensor& target) {
  if (target.defined()) check_probability_targets(target);
  return pointwise_loss("bce_with_logits", PointwiseLoss::bce_with_logits, logits, target);
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  return pointwise_loss("mse_loss", PointwiseLoss::mse, input, target);
}

Tensor soft_dice(const Tensor& probs0, const Tensor& target, double eps) {
  const Tensor probs = autocast(PrecisionClass::fp32, {probs0})[0];
  const int64_t C = check_class_inputs("soft_dice", "probs", probs, target);
  HG_CHECK(eps >= 0 && std::isfinite(eps), "soft_dice: eps must be finite and >= 0, got ", eps);
  const Device dev = probs.device();
  const int64_t N = target.numel();
  const Tensor p2 = probs.detach().contiguous().view({N, C});
  const Tensor t1 = target.detach().contiguous().view({N});
  Tensor dice = empty({C}, {probs.dtype(), dev});
  Tensor stats = empty({3, C}, {accum_dtype(probs.dtype()), dev});
  const int64_t bad = soft_dice_stub(dev, p2, t1, eps, dice, stats);
  if (bad >= 0) throw_bad_label("soft_dice", bad, target, C, "");
  autograd::record("soft_dice", {probs}, dice,
                   [t_saved = SavedTensor::other(t1, "target"), stats, eps, dt = probs.dtype(), s2 = p2.shape(),
                    shape = probs.shape()](const Tensor& g) {
    const Tensor& t1 = t_saved.unpack();
    Tensor gp = empty(s2, {dt, t1.device()});
    soft_dice_backward_stub(t1.device(), g.to(dt).contiguous(), t1, stats, eps, gp);
    return TensorList{gp.view(shape)};
  });
  return dice;
}

}  // namespace hg
