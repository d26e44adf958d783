// The kernel interface of the loss scaler, implemented by every backend so that a
// training step needs no host synchronisation: all state lives in device tensors.
#pragma once
#include <cstdint>
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
  double min_scale;  // the floor, > 0 (amp/grad_scaler.h: kLowestMinScale)
  double max_scale;  // inf: none
};

// The device state one update() changes; every tensor is 0-d: scale f32, the trackers i64.
// skip_streak counts the consecutive updates that saw a non-finite gradient.
struct ScaleState {
  Tensor scale, growth_tracker, hysteresis_tracker, skip_streak;
};

// The rule itself, one place for every backend (constexpr: CUDA kernels call it too).
// `(g - g) == 0` is the finiteness test: false for inf and NaN. The hysteresis tracker
// stops at 0 (Megatron's keeps counting down; at or below 0 both back off on every
// overflow, so only the stored value differs), so every state it produces is one that
// load_state_dict accepts.
constexpr void update_scale_rule(float& s, int64_t& growth, int64_t& hyst, int64_t& streak, float found_inf,
                                 const ScaleUpdateParams& p) {
  if (found_inf != 0.0f || found_inf != found_inf) {
    growth = 0;
    if (streak < INT64_MAX) ++streak;
    if (hyst > 0) --hyst;
    if (hyst == 0) {
      s = static_cast<float>(s * p.backoff_factor);
      if (s < p.min_scale) s = static_cast<float>(p.min_scale);
    }
    return;
  }
  streak = 0;
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

// PyTorch's rule with hysteresis and bounds (see amp/grad_scaler.h), found_inf a 0-d f32.
extern DispatchStub<void(const ScaleState& state, const Tensor& found_inf, const ScaleUpdateParams& p)>
    update_scale_stub;

// The numerics statistics of one tensor (amp/tensor_stats.h) packed into `out`, an f64
// vector of kNumericsFields on the tensor's device; nothing is read back to the host.
inline constexpr int kNumericsHistLo = -40, kNumericsHistHi = 20;
inline constexpr int kNumericsBins = kNumericsHistHi - kNumericsHistLo + 1;
inline constexpr int kNumericsScalars = 11;
inline constexpr int kNumericsFields = kNumericsScalars + kNumericsBins;
extern DispatchStub<void(const Tensor& x, const Tensor& out)> numerics_stats_stub;

}  // namespace hg
