// RMSprop: option checks, the state each parameter keeps, and the step handed to the
// fused kernel (ops/optim_update_rules.h).
#include "optim/rmsprop.h"

namespace hg::optim {

RMSprop::RMSprop(Params params, RMSpropOptions options)
    : Optimizer(std::move(params), "RMSprop", options.lr, options.weight_decay), options_(options) {
  check_hyper(options.alpha >= 0 && options.alpha <= 1, "alpha", options.alpha, "in [0, 1]");
  check_hyper(options.eps >= 0, "eps", options.eps, ">= 0");
  check_hyper(options.momentum >= 0, "momentum", options.momentum, ">= 0");
}

std::vector<std::string> RMSprop::buffer_names() const {
  std::vector<std::string> names{"square_avg"};
  if (options_.momentum > 0) names.push_back("momentum_buffer");
  if (options_.centered) names.push_back("grad_avg");
  return names;
}

void RMSprop::update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay,
                     const StepClock& clock) {
  const StateBuffers state{st.buffers.at("square_avg"), options_.centered ? st.buffers.at("grad_avg") : Tensor(),
                           options_.momentum > 0 ? st.buffers.at("momentum_buffer") : Tensor()};
  rmsprop_step_stub(param.device(), param, grad, state,
                    RMSpropHyper{lr, weight_decay, options_.alpha, options_.eps, options_.momentum, options_.centered},
                    clock);
}

}  // namespace hg::optim
