// The kernel interface of the loss scaler, implemented by every backend so that a
// training step needs no host synchronisation: all state lives in device tensors.
#pragma once
#include <vector>

#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// One pass over all gradients: g *= inv_scale in place (in the gradient's dtype's
// compute precision), counts[i] = number of non-finite elements of grads[i] after
// scaling (i64 [n]), found_inf = 1 if any count is non-zero (f32 0-d, else left as is).
extern DispatchStub<void(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf,
                         const Tensor& counts)>
    unscale_and_check_stub;

struct ScaleUpdateParams {
  double growth_factor;
  double backoff_factor;
  int64_t growth_interval;
  int64_t hysteresis;
  double min_scale;  // 0: none
  double max_scale;  // inf: none
};

// The rule itself, one place for every backend (constexpr: CUDA kernels call it too).
// `(g - g) == 0` is the finiteness test: false for inf and NaN.
constexpr void update_scale_rule(float& s, int64_t& growth, int64_t& hyst, float found_inf,
                                 const ScaleUpdateParams& p) {
  if (found_inf != 0.0f || found_inf != found_inf) {
    growth = 0;
    if (--hyst <= 0) {
      s = static_cast<float>(s * p.backoff_factor);
      if (p.min_scale > 0 && s < p.min_scale) s = static_cast<float>(p.min_scale);
    }
    return;
  }
  const int64_t successful = growth + 1;
  if (successful == p.growth_interval) {
    const float grown = static_cast<float>(s * p.growth_factor);
    if (grown - grown == 0.0f) s = grown;
    if (s > p.max_scale) s = static_cast<float>(p.max_scale);
    growth = 0;
    hyst = p.hysteresis;
  } else {
    growth = successful;
  }
}

// PyTorch's rule with hysteresis and bounds (see amp/grad_scaler.h); every tensor is
// 0-d: scale f32, growth_tracker i64, hysteresis_tracker i64, found_inf f32.
extern DispatchStub<void(const Tensor& scale, const Tensor& growth_tracker, const Tensor& hysteresis_tracker,
                         const Tensor& found_inf, const ScaleUpdateParams& p)>
    update_scale_stub;

// The numerics statistics of one tensor (amp/tensor_stats.h) packed into `out`, an f64
// vector of kNumericsFields on the tensor's device; nothing is read back to the host.
inline constexpr int kNumericsHistLo = -40, kNumericsHistHi = 20;
inline constexpr int kNumericsBins = kNumericsHistHi - kNumericsHistLo + 1;
inline constexpr int kNumericsScalars = 11;
inline constexpr int kNumericsFields = kNumericsScalars + kNumericsBins;
extern DispatchStub<void(const Tensor& x, const Tensor& out)> numerics_stats_stub;

}  // namespace hg
