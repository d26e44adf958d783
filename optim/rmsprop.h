// RMSprop with PyTorch's update rule and defaults (optionally centered, with momentum
// and L2 weight decay); its averages are f32 (f64 for f64 parameters).
#pragma once
#include "optim/optimizer.h"

namespace hg::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;  // smoothing of the squared-gradient average
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
  double momentum = 0;
  bool centered = false;  // divide by the estimated variance instead of the raw second moment
};

// g += wd p;  v = alpha v + (1 - alpha) g^2;  (centered: ga = lerp(ga, g, 1 - alpha),
// v' = v - ga^2);  a = sqrt(v') + eps;  momentum: buf = momentum buf + g / a, p -= lr buf;
// else p -= lr g / a.
class RMSprop : public Optimizer {
 public:
  explicit RMSprop(Params params, RMSpropOptions options = {});
  const RMSpropOptions& options() const { return options_; }

 protected:
  std::vector<std::string> buffer_names() const override;
  void update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay,
              const StepClock& clock) override;

 private:
  RMSpropOptions options_;
};

}  // namespace hg::optim
