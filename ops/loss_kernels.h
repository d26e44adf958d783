// The kernel interface of the losses, implemented by every backend. Tensors arrive
// contiguous; logits/probs flattened to [N, C], targets to [N]. Sums accumulate in f32
// (f64 for f64) and each result is rounded once into the input's dtype. Kernels that
// read class labels return the flat index of the first invalid one (-1 if none), and
// the op turns it into an error.
#pragma once
#include <cstdint>

#include "framework/dispatch.h"
#include "framework/tensor.h"
#include "ops/kernel_math.h"

namespace hg {

// Fused log-softmax + NLL over the rows of logits [N, C]. weight [C] is in the
// accumulation dtype (f32, f64 for f64 logits) or undefined (all ones). Rows whose
// target is ignore_index contribute nothing. Writes loss (0-d, logits' dtype) =
// sum w[t] (lse - x_t) / sum w[t], and for the backward lse [N] and wsum (0-d), both
// in the accumulation dtype.
extern DispatchStub<int64_t(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                            const Tensor& loss, const Tensor& lse, const Tensor& wsum)>
    cross_entropy_stub;
// gx = (exp(x - lse) - onehot(t)) * w[t] * g / wsum, zero on ignored rows; g is 0-d.
extern DispatchStub<void(const Tensor& g, const Tensor& logits, const Tensor& target, const Tensor& weight,
                         int64_t ignore_index, const Tensor& lse, const Tensor& wsum, const Tensor& gx)>
    cross_entropy_backward_stub;

// Losses that are the mean over elements of a function of (x, t), x and t of one shape
// and one floating dtype.
enum class PointwiseLoss : uint8_t {
  bce_with_logits,  // max(x, 0) - x t + log1p(exp(-|x|));  d/dx = sigmoid(x) - t, d/dt = -x
  mse,              // (x - t)^2;                           d/dx = 2 (x - t),    d/dt = -2 (x - t)
};
extern DispatchStub<void(PointwiseLoss, const Tensor& x, const Tensor& t, const Tensor& out)> pointwise_loss_stub;
// gx, gt = the derivatives times g / numel (g is 0-d); either output may be undefined.
extern DispatchStub<void(PointwiseLoss, const Tensor& g, const Tensor& x, const Tensor& t, const Tensor& gx,
                         const Tensor& gt)>
    pointwise_loss_backward_stub;

// Soft Dice of probs [N, C] against labels [N]: stats [3, C] (accumulation dtype) gets
// per class I = sum p y, P = sum p, Y = sum y; dice [C] (probs' dtype) = (2I + eps) / (P + Y + eps).
extern DispatchStub<int64_t(const Tensor& probs, const Tensor& target, double eps, const Tensor& dice,
                            const Tensor& stats)>
    soft_dice_stub;
// gp[n, c] = g_c (2 y_nc (P + Y + eps) - (2I + eps)) / (P + Y + eps)^2; g [C].
extern DispatchStub<void(const Tensor& g, const Tensor& target, const Tensor& stats, double eps, const Tensor& gp)>
    soft_dice_backward_stub;

// The per-element formulas every backend runs, in the accumulation type A (the sums around
// them are each backend's own, in a fixed order).

// A row's cross-entropy term w[t] (lse - x_t) from lse's parts: the row's maximum m and
// log_s = log sum exp(x - m).
template <class A>
HG_HOST_DEVICE A cross_entropy_row_loss(A w, A m, A log_s, A x_t) {
  return w * ((m - x_t) + log_s);
}

template <class A>
HG_HOST_DEVICE A pointwise_loss_value(PointwiseLoss kind, A x, A t) {
  if (kind == PointwiseLoss::mse) return (x - t) * (x - t);
  // max(x, 0) - x t + log1p(exp(-|x|)): exp never overflows, whatever x's sign.
  return (x < A(0) ? A(0) : x) - x * t + math_log1p(math_exp(-math_abs(x)));
}

// d/dx and d/dt of one element's loss, times scale (g / numel).
template <class A>
struct PointwiseLossGrad {
  A gx, gt;
};
template <class A>
HG_HOST_DEVICE PointwiseLossGrad<A> pointwise_loss_grad(PointwiseLoss kind, A x, A t, A scale, bool want_gx) {
  if (kind == PointwiseLoss::mse) {
    const A d = A(2) * (x - t) * scale;
    return {d, -d};
  }
  return {want_gx ? (math_sigmoid(x) - t) * scale : A(0), -x * scale};
}

// Soft Dice of one class from its sums I = sum p y, P = sum p, Y = sum y.
template <class A>
HG_HOST_DEVICE A soft_dice_value(A I, A P, A Y, A eps) {
  return (A(2) * I + eps) / (P + Y + eps);
}

// d dice_c / d p_nc times the class's upstream gradient gc: `off` on every row, `on` on the
// rows labelled c ((2 y D - num) / D^2 with D = P + Y + eps, num = 2I + eps).
template <class A>
struct SoftDiceGradTerms {
  A on, off;
};
template <class A>
HG_HOST_DEVICE SoftDiceGradTerms<A> soft_dice_grad(A gc, A I, A P, A Y, A eps) {
  const A num = A(2) * I + eps, den = P + Y + eps;
  const A off = -gc * num / (den * den);
  return {gc * A(2) / den + off, off};
}

}  // namespace hg
