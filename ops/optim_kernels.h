// The optimizers' kernel interface, implemented by every backend: one fused update per
// optimizer kind over parameter, gradient and state buffers (ops/optim_update_rules.h
// holds the per-element rules both the CPU loop and the CUDA kernel run).
#pragma once
#include <array>

#include "framework/dispatch.h"
#include "ops/optim_update_rules.h"
#include "framework/tensor.h"

namespace hg::optim {

// Which step this is, and whether to take it. On the CPU, `count` is the step number (1
// for the first). On cuda the kernels read `device_count` (i64 0-d: the steps taken before
// this one, t = value + 1) and, when `skip_if` is defined, the found-inf flag (f32 0-d):
// non-zero or NaN and the kernel writes nothing. That keeps a skipped step on the device,
// with no host synchronisation; count_step_stub then advances device_count unless skipped.
struct StepClock {
  int64_t count = 0;
  Tensor device_count;
  Tensor skip_if;
};

// The state buffers, contiguous, of the parameter's shape and one dtype (f32, f64 for
// f64, or the parameter's own); undefined where unused. Adam: exp_avg, exp_avg_sq,
// max_exp_avg_sq; SGD: momentum_buffer; RMSprop: square_avg, grad_avg, momentum_buffer.
using StateBuffers = std::array<Tensor, 3>;

// param and grad contiguous, one shape, on one device; grad of any floating dtype.
template <class Hyper>
using StepStub = DispatchStub<void(const Tensor& param, const Tensor& grad, const StateBuffers& state,
                                   const Hyper& hyper, const StepClock& clock)>;
extern StepStub<AdamHyper> adam_step_stub;
extern StepStub<SGDHyper> sgd_step_stub;
extern StepStub<RMSpropHyper> rmsprop_step_stub;

// device_count += 1 unless skip_if (when defined) is non-zero or NaN; on the device.
extern DispatchStub<void(const Tensor& device_count, const Tensor& skip_if)> count_step_stub;

// The rules as the generic kernels call them: scalars of step t, and one element with its
// (up to) three state values.
struct AdamRule {
  using Hyper = AdamHyper;
  template <class C>
  static HG_UPDATE_RULE AdamScalars<C> scalars(const Hyper& h, double t) { return adam_scalars<C>(h, t); }
  template <class C>
  static HG_UPDATE_RULE C apply(C p, C g, C* s, const AdamScalars<C>& k) { return adam_element(p, g, s[0], s[1], s[2], k); }
};

struct SGDRule {
  using Hyper = SGDHyper;
  template <class C>
  static HG_UPDATE_RULE SGDScalars<C> scalars(const Hyper& h, double t) { return sgd_scalars<C>(h, t); }
  template <class C>
  static HG_UPDATE_RULE C apply(C p, C g, C* s, const SGDScalars<C>& k) { return sgd_element(p, g, s[0], k); }
};

struct RMSpropRule {
  using Hyper = RMSpropHyper;
  template <class C>
  static HG_UPDATE_RULE RMSpropScalars<C> scalars(const Hyper& h, double t) { return rmsprop_scalars<C>(h, t); }
  template <class C>
  static HG_UPDATE_RULE C apply(C p, C g, C* s, const RMSpropScalars<C>& k) {
    return rmsprop_element(p, g, s[0], s[1], s[2], k);
  }
};

}  // namespace hg::optim
