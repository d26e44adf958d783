// Adam and AdamW: option checks, the state each parameter keeps, and the step handed to
// the fused kernel (ops/optim_update_rules.h; the bias corrections are per step).
#include "optim/adam.h"

namespace hg::optim {

namespace {

AdamOptions from_adamw(const AdamWOptions& o) { return {o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad}; }

}  // namespace

Adam::Adam(Params params, AdamOptions options) : Adam(std::move(params), options, "Adam", false) {}

Adam::Adam(Params params, AdamOptions options, std::string name, bool decoupled)
    : Optimizer(std::move(params), std::move(name), options.lr, options.weight_decay),
      options_(options),
      decoupled_(decoupled) {
  check_hyper(options.betas.first >= 0 && options.betas.first < 1, "betas.first", options.betas.first, "in [0, 1)");
  check_hyper(options.betas.second >= 0 && options.betas.second < 1, "betas.second", options.betas.second,
              "in [0, 1)");
  check_hyper(options.eps >= 0, "eps", options.eps, ">= 0");
}

AdamW::AdamW(Params params, AdamWOptions options) : Adam(std::move(params), from_adamw(options), "AdamW", true) {}

std::vector<std::string> Adam::buffer_names() const {
  if (options_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay,
                  const StepClock& clock) {
  const auto [beta1, beta2] = options_.betas;
  const StateBuffers state{st.buffers.at("exp_avg"), st.buffers.at("exp_avg_sq"),
                           options_.amsgrad ? st.buffers.at("max_exp_avg_sq") : Tensor()};
  adam_step_stub(param.device(), param, grad, state,
                 AdamHyper{lr, weight_decay, beta1, beta2, options_.eps, options_.amsgrad, decoupled_}, clock);
}

}  // namespace hg::optim
