// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay),
// with PyTorch's bias correction, defaults and optional AMSGrad. Moments are f32 (f64
// for f64 parameters) so that eps and tiny second moments never underflow as in f16.
#pragma once
#include <utility>

#include "optim/optimizer.h"

namespace hg::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
  bool amsgrad = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: p *= 1 - lr * weight_decay before the step
  bool amsgrad = false;
};

// m = lerp(m, g, 1 - b1);  v = b2 v + (1 - b2) g^2;  (amsgrad: v_max = max(v_max, v))
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
class Adam : public Optimizer {
 public:
  explicit Adam(Params params, AdamOptions options = {});
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(Params params, AdamOptions options, std::string name, bool decoupled);
  std::vector<std::string> buffer_names() const override;
  void update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay,
              const StepClock& clock) override;

 private:
  AdamOptions options_;
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  explicit AdamW(Params params, AdamWOptions options = {});
};

}  // namespace hg::optim
