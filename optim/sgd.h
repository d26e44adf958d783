// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2
// weight decay, with PyTorch's update rule and defaults.
#pragma once
#include "optim/optimizer.h"

namespace hg::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2: added to the gradient as weight_decay * param
  bool nesterov = false;    // needs momentum > 0 and dampening 0
};

// d = g + wd p;  buf = d on the first step, else momentum buf + (1 - dampening) d;
// d = nesterov ? d + momentum buf : buf;  p -= lr d.
class SGD : public Optimizer {
 public:
  explicit SGD(Params params, SGDOptions options = {});
  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<std::string> buffer_names() const override;
  void update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay,
              const StepClock& clock) override;

 private:
  SGDOptions options_;
};

}  // namespace hg::optim
