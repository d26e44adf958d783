// SGD: option checks, the state each parameter keeps, and the step handed to the fused
// kernel (ops/optim_update_rules.h).
#include "optim/sgd.h"

namespace hg::optim {

SGD::SGD(Params params, SGDOptions options)
    : Optimizer(std::move(params), "SGD", options.lr, options.weight_decay), options_(options) {
  check_hyper(options.momentum >= 0, "momentum", options.momentum, ">= 0");
  check_hyper(options.dampening >= 0 && options.dampening <= 1, "dampening", options.dampening, "in [0, 1]");
  if (options.nesterov) {
    check_hyper(options.momentum > 0, "momentum", options.momentum, "> 0 with nesterov");
    check_hyper(options.dampening == 0, "dampening", options.dampening, "0 with nesterov");
  }
}

std::vector<std::string> SGD::buffer_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay,
                 const StepClock& clock) {
  const StateBuffers state{options_.momentum != 0 ? st.buffers.at("momentum_buffer") : Tensor(), Tensor(), Tensor()};
  sgd_step_stub(param.device(), param, grad, state,
                SGDHyper{lr, weight_decay, options_.momentum, options_.dampening, options_.nesterov}, clock);
}

}  // namespace hg::optim
