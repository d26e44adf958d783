// Gradient clipping: the total norm is summed in fixed blocks (in f32, or f64 for f64
// gradients) combined in double, so it does not depend on the thread count. Gradients on
// another device go through tensor ops there; only each gradient's norm part comes back.
#include "optim/clip_grad.h"

#include <cmath>

#include "framework/autograd.h"
#include "ops/copy.h"
#include "ops/cpu/loops.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace hg::optim {

namespace {

constexpr int64_t kBlock = 1024;

std::vector<Tensor> defined_grads(const std::vector<Tensor>& params, const char* op) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    HG_CHECK(params[i].defined(), op, ": parameter ", i, " is an undefined tensor");
    const Tensor& g = params[i].grad();
    if (!g.defined()) continue;
    HG_CHECK(is_floating(g.dtype()), op, ": the gradient of parameter ", i,
             " must have a floating dtype, got ", dtype_name(g.dtype()));
    grads.push_back(g);
  }
  return grads;
}

// The sum of |g|^p (or the max of |g|) of a gradient on a device, by the device's
// reductions in f32 (f64 for f64); reading it back synchronises.
double device_norm_part(const Tensor& grad, double p) {
  if (grad.numel() == 0) return 0.0;
  const Tensor a = abs(grad.to(grad.dtype() == f64 ? f64 : f32));
  if (std::isinf(p)) return max(a).item<double>();
  if (p == 2.0) return sum(square(a)).item<double>();
  if (p == 1.0) return sum(a).item<double>();
  return sum(pow(a, p)).item<double>();
}

// Sum of |g|^p (or the max of |g| when p is inf) over one gradient.
double norm_part(const Tensor& grad, double p) {
  if (!grad.device().is_cpu()) return device_norm_part(grad, p);
  const Tensor g = grad.contiguous();
  const int64_t n = g.numel();
  const bool inf = std::isinf(p);
  return visit_floating(g.dtype(), "clip_grad_norm_", [&]<typename T>() {
    using A = accum_t<T>;
    const T* x = g.data<T>();
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<double> partial(static_cast<size_t>(blocks));
    cpu::parallel_for(blocks, kBlock * 4, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        A acc = 0;
        for (int64_t i = b * kBlock, e = std::min(n, (b + 1) * kBlock); i < e; ++i) {
          const A a = std::abs(static_cast<A>(load(x[i])));
          if (inf) acc = (a > acc || std::isnan(a)) ? a : acc;
          else if (p == 2.0) acc += a * a;
          else if (p == 1.0) acc += a;
          else acc += std::pow(a, static_cast<A>(p));
        }
        partial[static_cast<size_t>(b)] = acc;
      }
    });
    double total = 0;
    for (double v : partial) total = inf ? ((v > total || std::isnan(v)) ? v : total) : total + v;
    return total;
  });
}

// g = f(g) in place for every element of every gradient, computed in f32 (f64 for f64);
// on another device, g = on_device(g in f32 or f64) by tensor ops there.
template <class F, class D>
void map_grads(const std::vector<Tensor>& grads, const char* op, F f, D on_device) {
  for (const Tensor& g : grads) {
    if (!g.device().is_cpu()) {
      copy_(g, on_device(g.to(g.dtype() == f64 ? f64 : f32)));
      continue;
    }
    visit_floating(g.dtype(), op, [&]<typename T>() {
      cpu::for_each_strided<1>(g.shape(), cpu::operands<1>({&g}),
                               [&](int64_t len, std::array<char*, 1> ptr, std::array<int64_t, 1> st) {
                                 for (int64_t i = 0; i < len; ++i) {
                                   T& v = *reinterpret_cast<T*>(ptr[0] + i * st[0]);
                                   v = store<T>(f(load(v)));
                                 }
                               });
    });
    g.bump_version();
  }
}

// Refuses gradients that still carry a loss scale (amp::GradScaler marks them in
// backward and clears the mark in unscale_), before anything is modified.
void refuse_scaled(const std::vector<Tensor>& params) {
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    const std::shared_ptr<const LossScaleMark> mark = autograd::loss_scale_of(p.grad());
    if (!mark) continue;
    throw Error(detail::concat(
        "clipping gradients that are still multiplied by the loss scale S = ", mark->scale.item<double>(),
        " (parameter '", p.name(), "'): the threshold would apply to S x grad, so it would fire on every step and "
        "mean nothing, and the step, unscaled after the clip, would shrink: S times under SGD once the "
        "true norm exceeds the threshold, and under Adam too once the gradient it then sees, about threshold / "
        "(S sqrt(n)) per element for n parameters, nears eps. "
        "Call scaler.unscale_(optimizer) first: scale -> backward -> unscale_ -> clip -> step -> update"));
  }
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  HG_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  HG_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be > 0 or INFINITY, got ", norm_type);
  refuse_scaled(params);
  NoGrad no_grad;
  const std::vector<Tensor> grads = defined_grads(params, "clip_grad_norm_");
  if (grads.empty()) return 0.0;
  const bool inf = std::isinf(norm_type);
  double acc = 0;
  for (const Tensor& g : grads) {
    const double part = norm_part(g, norm_type);
    acc = inf ? ((part > acc || std::isnan(part)) ? part : acc) : acc + part;
  }
  const double total = inf || norm_type == 1.0 ? acc : norm_type == 2.0 ? std::sqrt(acc) : std::pow(acc, 1.0 / norm_type);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    map_grads(
        grads, "clip_grad_norm_", [coef]<class C>(C v) { return v * static_cast<C>(coef); },
        [coef](const Tensor& g) { return g * coef; });
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip) {
  HG_CHECK(clip >= 0, "clip_grad_value_: clip must be >= 0, got ", clip);
  refuse_scaled(params);
  NoGrad no_grad;
  map_grads(
      defined_grads(params, "clip_grad_value_"), "clip_grad_value_",
      [clip]<class C>(C v) {
        const C c = static_cast<C>(clip);
        return v < -c ? -c : v > c ? c : v;
      },
      [clip](const Tensor& g) { return clamp(g, -clip, clip); });
}

}  // namespace hg::optim
