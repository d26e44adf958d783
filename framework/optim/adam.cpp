// Adam's and AdamW's fused update: one pass over parameter, gradient and moments in f32
// (f64 for f64 parameters); the bias corrections are computed once per step in double.
#include "framework/optim/adam.h"

#include <cmath>

#include "framework/optim/state_type.h"
#include "ops/cpu/loops.h"

namespace hg::optim {

namespace {

template <class C>
struct AdamScalars {
  C l2;               // weight decay added to the gradient (Adam)
  C decay;            // the factor 1 - lr * weight_decay the parameter is scaled by (AdamW)
  C one_minus_beta1;  // lerp weight of the first moment
  C beta2, one_minus_beta2;
  C step_size;        // lr / (1 - beta1^t)
  C bias_correction2_sqrt;
  C eps;
  bool amsgrad;
};

// One element of the update, in PyTorch's order of operations. Written so a CUDA
// kernel can run it as is.
template <class C>
inline C adam_element(C p, C g, C& m, C& v, C& v_max, const AdamScalars<C>& s) {
  if (s.l2 != C(0)) g = g + s.l2 * p;
  p = p * s.decay;
  // PyTorch's lerp: the form that stays exact at its end for large weights.
  m = s.one_minus_beta1 < C(0.5) ? m + s.one_minus_beta1 * (g - m) : g - (g - m) * (C(1) - s.one_minus_beta1);
  v = v * s.beta2 + s.one_minus_beta2 * g * g;
  C second = v;
  if (s.amsgrad) {
    v_max = v_max > v ? v_max : v;
    second = v_max;
  }
  const C denom = std::sqrt(second) / s.bias_correction2_sqrt + s.eps;
  return p + (-s.step_size) * m / denom;
}

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

void Adam::update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay) {
  const auto [beta1, beta2] = options_.betas;
  const double t = static_cast<double>(st.step);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  const double bias_correction2 = 1.0 - std::pow(beta2, t);
  const int64_t n = param.numel();
  visit_floating(param.dtype(), "Adam.step", [&]<typename T>() {
    using C = compute_t<T>;
    const AdamScalars<C> s{static_cast<C>(decoupled_ ? 0.0 : weight_decay),
                           static_cast<C>(decoupled_ ? 1.0 - lr * weight_decay : 1.0),
                           static_cast<C>(1.0 - beta1),
                           static_cast<C>(beta2),
                           static_cast<C>(1.0 - beta2),
                           static_cast<C>(lr / bias_correction1),
                           static_cast<C>(std::sqrt(bias_correction2)),
                           static_cast<C>(options_.eps),
                           options_.amsgrad};
    T* p = param.data<T>();
    visit_state_type<T>(st.buffers.at("exp_avg"), [&]<typename S>() {
      S* m = st.buffers.at("exp_avg").data<S>();
      S* v = st.buffers.at("exp_avg_sq").data<S>();
      S* v_max = options_.amsgrad ? st.buffers.at("max_exp_avg_sq").data<S>() : nullptr;
      visit_floating(grad.dtype(), "Adam.step", [&]<typename G>() {
        const G* g = grad.data<G>();
        cpu::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            C mi = load(m[i]), vi = load(v[i]), vmax = v_max ? load(v_max[i]) : C(0);
            p[i] = store<T>(adam_element<C>(load(p[i]), static_cast<C>(load(g[i])), mi, vi, vmax, s));
            m[i] = store<S>(mi);
            v[i] = store<S>(vi);
            if (v_max) v_max[i] = store<S>(vmax);
          }
        });
      });
    });
  });
}

}  // namespace hg::optim
