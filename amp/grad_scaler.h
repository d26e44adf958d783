// Dynamic loss scaling with PyTorch's GradScaler semantics. The scale, the growth
// tracker and the found-inf flags are tensors on the training device, so a step needs
// no host synchronisation until someone reads a value.
//
// State machine (per update()):  found_inf ->  scale *= backoff_factor, tracker = 0
//                                 otherwise ->  tracker += 1; when tracker reaches
//   growth_interval: scale *= growth_factor unless that is not finite, tracker = 0.
// Extensions (off by default): hysteresis h backs off only on the h-th overflow since
// the last growth (Megatron's rule); min_scale/max_scale bound the scale.
#pragma once
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "framework/optim/optimizer.h"
#include "framework/state_dict.h"

namespace hg::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t hysteresis = 1;  // 1: back off on every overflow (PyTorch)
  double min_scale = 0.0;  // 0: unbounded
  double max_scale = std::numeric_limits<double>::infinity();
  bool enabled = true;
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

  // loss * scale, recorded as a graph node ("scale_loss"); the result is f32.
  Tensor scale(const Tensor& loss);
  // Multiplies every gradient of `opt` by 1/scale and checks them for inf/NaN in one
  // pass; once per optimizer between update()s. f16 gradients are refused (keep f32
  // master weights: amp-master, or f32 parameters: amp).
  void unscale_(optim::Optimizer& opt);
  // Unscales if not done yet, then steps `opt` unless a gradient was non-finite.
  StepResult step(optim::Optimizer& opt);
  // Once per iteration, after every optimizer's step(): updates the scale from the
  // found-inf flags of all of them. new_scale sets it explicitly instead.
  void update();
  void update(double new_scale);

  double get_scale() const;  // reads the device value
  const Tensor& scale_tensor() const { return scale_; }
  const Tensor& growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return opt_.enabled; }
  const GradScalerOptions& options() const { return opt_; }

  // True between scale() and the unscale_() of the optimizer owning `param`'s grad.
  bool holds_scaled_grad(const Tensor& param) const;

  StateDict state_dict() const;
  void load_state_dict(const StateDict& sd);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct PerOptimizer {
    Stage stage = Stage::ready;
    StepResult result;
    std::set<const TensorImpl*> params;
  };
  PerOptimizer& state_of(optim::Optimizer& opt);

  GradScalerOptions opt_;
  Device device_;
  Tensor scale_, growth_tracker_, hysteresis_tracker_;
  std::map<const optim::Optimizer*, PerOptimizer> per_opt_;
  bool scaled_since_update_ = false;
};

}  // namespace hg::amp
