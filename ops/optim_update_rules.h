// The optimizers' per-element update rules, in PyTorch's order of operations, and the
// per-step scalars they read. Plain functions of numbers, so the CPU loop
// (ops/cpu/optim_cpu.cpp) and the CUDA kernel (cuda/optim.cu) run the same code.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define HG_UPDATE_RULE __host__ __device__ inline
#else
#define HG_UPDATE_RULE inline
#endif

namespace hg::optim {

// The f32 function for f32 (sqrtf: correctly rounded on the CPU and on the device alike).
template <class C>
HG_UPDATE_RULE C rule_sqrt(C x) {
  if constexpr (std::is_same_v<C, float>) return ::sqrtf(x);
  else return ::sqrt(x);
}

// A step's hyper-parameters as the optimizer holds them (double), the same for every
// element; the kernels turn them into the compute type's scalars once per step.
struct AdamHyper {
  double lr, weight_decay, beta1, beta2, eps;
  bool amsgrad, decoupled;
};

struct SGDHyper {
  double lr, weight_decay, momentum, dampening;
  bool nesterov;
};

struct RMSpropHyper {
  double lr, weight_decay, alpha, eps, momentum;
  bool centered;
};

template <class C>
struct AdamScalars {
  C l2;               // weight decay added to the gradient (Adam)
  C decay;            // the factor 1 - lr * weight_decay the parameter is scaled by (AdamW)
  C one_minus_beta1;  // lerp weight of the first moment
  C beta2, one_minus_beta2;
  C step_size;        // lr / (1 - beta1^t)
  C bias_correction2_sqrt;
  C eps;
  bool amsgrad;
};

// The scalars of step t (1 for the first), the bias corrections computed in double.
template <class C>
HG_UPDATE_RULE AdamScalars<C> adam_scalars(const AdamHyper& h, double t) {
  const double bias_correction1 = 1.0 - ::pow(h.beta1, t);
  const double bias_correction2 = 1.0 - ::pow(h.beta2, t);
  return {static_cast<C>(h.decoupled ? 0.0 : h.weight_decay),
          static_cast<C>(h.decoupled ? 1.0 - h.lr * h.weight_decay : 1.0),
          static_cast<C>(1.0 - h.beta1),
          static_cast<C>(h.beta2),
          static_cast<C>(1.0 - h.beta2),
          static_cast<C>(h.lr / bias_correction1),
          static_cast<C>(::sqrt(bias_correction2)),
          static_cast<C>(h.eps),
          h.amsgrad};
}

// The larger of a and b (b when either is NaN); a vector type V brings its own overload.
template <class V>
HG_UPDATE_RULE V rule_max(V a, V b) {
  return a > b ? a : b;
}

// V is C, or (the CPU's vector loop) eight C lanes doing the same IEEE operations.
template <class C, class V = C>
HG_UPDATE_RULE V adam_element(V p, V g, V& m, V& v, V& v_max, const AdamScalars<C>& s) {
  if (s.l2 != C(0)) g = g + V(s.l2) * p;
  p = p * V(s.decay);
  // PyTorch's lerp: the form that stays exact at its end for large weights.
  m = s.one_minus_beta1 < C(0.5) ? m + V(s.one_minus_beta1) * (g - m) : g - (g - m) * V(C(1) - s.one_minus_beta1);
  v = v * V(s.beta2) + V(s.one_minus_beta2) * g * g;
  V second = v;
  if (s.amsgrad) {
    v_max = rule_max(v_max, v);
    second = v_max;
  }
  const V denom = rule_sqrt(second) / V(s.bias_correction2_sqrt) + V(s.eps);
  return p + V(-s.step_size) * m / denom;
}

template <class C>
struct SGDScalars {
  C lr, weight_decay, momentum, dampening_complement;
  bool first_step, nesterov;
};

template <class C>
HG_UPDATE_RULE SGDScalars<C> sgd_scalars(const SGDHyper& h, double t) {
  return {static_cast<C>(h.lr), static_cast<C>(h.weight_decay), static_cast<C>(h.momentum),
          static_cast<C>(1.0 - h.dampening), t == 1.0, h.nesterov};
}

// `buf` is the momentum buffer (unused when momentum is 0).
template <class C>
HG_UPDATE_RULE C sgd_element(C p, C g, C& buf, const SGDScalars<C>& s) {
  C d = g;
  if (s.weight_decay != C(0)) d = d + s.weight_decay * p;
  if (s.momentum != C(0)) {
    buf = s.first_step ? d : s.momentum * buf + s.dampening_complement * d;
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  return p - s.lr * d;
}

template <class C>
struct RMSpropScalars {
  C lr, weight_decay, alpha, one_minus_alpha, eps, momentum;
  bool centered;
};

template <class C>
HG_UPDATE_RULE RMSpropScalars<C> rmsprop_scalars(const RMSpropHyper& h, double) {
  return {static_cast<C>(h.lr),    static_cast<C>(h.weight_decay), static_cast<C>(h.alpha),
          static_cast<C>(1.0 - h.alpha), static_cast<C>(h.eps), static_cast<C>(h.momentum),
          h.centered};
}

// `grad_avg` and `buf` are used only when centered / with momentum.
template <class C>
HG_UPDATE_RULE C rmsprop_element(C p, C g, C& square_avg, C& grad_avg, C& buf, const RMSpropScalars<C>& s) {
  if (s.weight_decay != C(0)) g = g + s.weight_decay * p;
  square_avg = square_avg * s.alpha + s.one_minus_alpha * g * g;
  C avg;
  if (s.centered) {
    grad_avg = s.one_minus_alpha < C(0.5) ? grad_avg + s.one_minus_alpha * (g - grad_avg)
                                          : g - (g - grad_avg) * (C(1) - s.one_minus_alpha);
    avg = rule_sqrt(square_avg + C(-1) * grad_avg * grad_avg) + s.eps;
  } else {
    avg = rule_sqrt(square_avg) + s.eps;
  }
  if (s.momentum > C(0)) {
    buf = buf * s.momentum + g / avg;
    return p + (-s.lr) * buf;
  }
  return p + (-s.lr) * g / avg;
}

}  // namespace hg::optim
