// Dynamic loss scaling with PyTorch's GradScaler semantics. The scale, the growth
// tracker and the found-inf flags are tensors on the training device, so a step needs
// no host synchronisation until someone reads a value.
//
// State machine (per update()):  found_inf ->  scale *= backoff_factor, tracker = 0
//                                 otherwise ->  tracker += 1; when tracker reaches
//   growth_interval: scale *= growth_factor unless that is not finite, tracker = 0.
// Extensions (off by default): hysteresis h backs off only on the h-th overflow since
// the last growth (Megatron's rule); max_scale bounds the scale from above.
// Deviations from PyTorch (on by default, the update rule otherwise exact): the scale never
// backs off below min_scale = 2^-24 (PyTorch's can reach 0 after ~166 overflows in a row,
// and then every later step is skipped: 0 x inf is NaN), and a run of skip_streak_limit
// consecutive skipped steps is reported (a warning naming the parameters, or an error).
#pragma once
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/async_read.h"
#include "framework/autograd.h"
#include "optim/optimizer.h"
#include "framework/state_dict.h"

namespace hg::amp {

// The lowest floor a scale may have: below 2^-126 its inverse, the unscaling factor, is
// not a finite f32 (inf for scales under 2^-128), and no step could ever succeed again.
inline constexpr double kLowestMinScale = 0x1p-126;

// What to do once skip_streak_limit steps in a row were skipped.
enum class SkipStreakAction { warn, error };

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t hysteresis = 1;     // 1: back off on every overflow (PyTorch)
  double min_scale = 0x1p-24;  // the floor, in [kLowestMinScale, init_scale]; PyTorch has none
  double max_scale = std::numeric_limits<double>::infinity();
  bool enabled = true;
  // After this many consecutive skipped steps (0: never) update() warns once per run of
  // them, naming the parameters whose gradients were non-finite, or throws hg::Error. A
  // loss scale cannot fix gradients that are non-finite at every scale (NaN data or
  // weights, an op that is inf at any scale). Read without a host synchronisation: on a
  // GPU the report may come an update or two after the limit was reached.
  int64_t skip_streak_limit = 50;
  SkipStreakAction on_skip_streak = SkipStreakAction::warn;
};

// What step() did. Reading skipped()/nonfinite() synchronises with the device.
struct StepResult {
  Tensor found_inf;         // 0-d f32: 1 if any gradient was inf/NaN
  Tensor scale;             // 0-d f32: the scale the gradients carried
  Tensor nonfinite_counts;  // i64 [n]: non-finite elements per parameter
  std::vector<std::string> names;
  std::vector<int64_t> numels;  // elements of each parameter, by names' order
  bool skipped() const;
  double scale_value() const;
  // (parameter name, number of non-finite gradient elements) for each bad parameter.
  std::vector<std::pair<std::string, int64_t>> nonfinite() const;
  // One line for a training log, "" when the step was not skipped: "step skipped at
  // loss scale 65536: non-finite gradients in 2 of 40 parameters: up2.conv1.weight
  // (12 of 9216), ...".
  std::string summary() const;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions o = {}, Device device = Device::cpu());
  ~GradScaler();
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  // loss * scale, recorded as a graph node ("scale_loss"); the result is f32. O(1): the
  // graph is not walked. Backward from it marks every leaf gradient it reaches as
  // carrying the scale (LossScaleMark), which clipping refuses until unscale_.
  Tensor scale(const Tensor& loss);
  // Multiplies every gradient of `opt` by 1/scale and checks them for inf/NaN in one
  // pass; once per optimizer between update()s. f16 gradients are refused (keep f32
  // master weights: amp-master, or f32 parameters: amp). Refused when no loss was
  // scaled since the last update() (the gradients do not carry the scale).
  void unscale_(optim::Optimizer& opt);
  // Unscales if not done yet, then steps `opt` unless a gradient was non-finite.
  // Refused, as PyTorch does, when no loss was scaled since the last update() and when
  // none of the optimizer's parameters has a gradient ("No inf checks were recorded").
  StepResult step(optim::Optimizer& opt);
  // Once per iteration, after every optimizer's step(): updates the scale from the
  // found-inf flags of all of them. new_scale sets it explicitly instead.
  void update();
  void update(double new_scale);

  double get_scale() const;  // reads the device value
  const Tensor& scale_tensor() const { return scale_; }
  const Tensor& growth_tracker() const { return growth_tracker_; }
  // Consecutive update()s that saw a non-finite gradient (0-d i64 on the scaler's device).
  const Tensor& skip_streak() const { return skip_streak_; }
  bool is_enabled() const { return opt_.enabled; }
  const GradScalerOptions& options() const { return opt_; }

  // True when `param`'s gradient carries this scaler's scale: backward from a loss given
  // to scale() since the last update() reached param (or MasterWeights copied such a
  // gradient to it), and the optimizer owning it has not been unscaled since.
  bool holds_scaled_grad(const Tensor& param) const;

  // Data-parallel training: called with each optimizer's found-inf flag (0-d f32) as soon
  // as unscale_ has computed it, before the skip decision, on every rank (even one whose
  // parameters have no gradient). dist::agree_on_overflow installs an all-reduce (max) so
  // all ranks skip the same steps and keep the same scale. Null removes it.
  using FoundInfReducer = std::function<void(Tensor& found_inf)>;
  void set_found_inf_reducer(FoundInfReducer r) { found_inf_reducer_ = std::move(r); }

  // PyTorch's keys ("scale", "_growth_tracker", "growth_factor", "backoff_factor",
  // "growth_interval") plus this scaler's extensions. A disabled scaler saves {} and
  // loads only that back (as PyTorch: it ignores what it is given). Loading checks
  // every entry (a finite scale > 0 within [min_scale, max_scale], growth_factor > 1,
  // backoff_factor in (0, 1), integer intervals and trackers in range, one-element
  // tensors of the right dtypes, no unknown keys) and changes nothing when it refuses.
  // Every state update() can produce loads back, and so do the states earlier versions
  // wrote: a negative hysteresis tracker (which meant "back off on every overflow", as
  // 0 does) loads as 0, and a min_scale of 0 (which meant "no floor") as kLowestMinScale.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& sd);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct PerOptimizer {
    Stage stage = Stage::ready;
    StepResult result;
  };

  // The skip-streak watch: reads the streak and the last step's non-finite counts back
  // without waiting, and reports a run of skipped steps once.
  struct StreakRead {
    AsyncRead read;             // f64 [streak, scale, counts of every parameter...]
    int64_t update_index = 0;   // the update() that started it
    std::vector<std::string> names;
    std::vector<int64_t> numels;
  };
  void start_streak_read();
  void check_skip_streak(StreakRead& r);
  void report_skip_streak(int64_t streak, double scale, const Tensor& counts, const StreakRead& r);

  GradScalerOptions opt_;
  Device device_;
  Tensor scale_, growth_tracker_, hysteresis_tracker_, skip_streak_;
  int64_t updates_ = 0;             // update() calls so far
  int64_t reported_streak_start_ = -1;  // the update index at which the last reported run began
  StreakRead streak_read_;
  std::map<const optim::Optimizer*, PerOptimizer> per_opt_;
  bool scaled_since_update_ = false;
  // The mark this iteration's scaled gradients carry, made by the first scale() after an
  // update(); update() drops it, which expires every gradient's mark at once.
  std::shared_ptr<LossScaleMark> mark_;
  FoundInfReducer found_inf_reducer_;
};

}  // namespace hg::amp
