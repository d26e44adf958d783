// RMSprop's fused update: one pass over parameter, gradient and averages in f32 (f64
// for f64 parameters), rounding the parameter once.
#include "framework/optim/rmsprop.h"

#include <cmath>

#include "framework/optim/state_type.h"
#include "ops/cpu/loops.h"

namespace hg::optim {

namespace {

template <class C>
struct RMSpropScalars {
  C lr, weight_decay, alpha, one_minus_alpha, eps, momentum;
  bool centered;
};

// One element of the update, in PyTorch's order of operations; `grad_avg` and `buf`
// are used only when centered / with momentum. Written so a CUDA kernel can run it as is.
template <class C>
inline C rmsprop_element(C p, C g, C& square_avg, C& grad_avg, C& buf, const RMSpropScalars<C>& s) {
  if (s.weight_decay != C(0)) g = g + s.weight_decay * p;
  square_avg = square_avg * s.alpha + s.one_minus_alpha * g * g;
  C avg;
  if (s.centered) {
    grad_avg = s.one_minus_alpha < C(0.5) ? grad_avg + s.one_minus_alpha * (g - grad_avg)
                                          : g - (g - grad_avg) * (C(1) - s.one_minus_alpha);
    avg = std::sqrt(square_avg + C(-1) * grad_avg * grad_avg) + s.eps;
  } else {
    avg = std::sqrt(square_avg) + s.eps;
  }
  if (s.momentum > C(0)) {
    buf = buf * s.momentum + g / avg;
    return p + (-s.lr) * buf;
  }
  return p + (-s.lr) * g / avg;
}

}  // namespace

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

void RMSprop::update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay) {
  const int64_t n = param.numel();
  visit_floating(param.dtype(), "RMSprop.step", [&]<typename T>() {
    using C = compute_t<T>;
    const RMSpropScalars<C> s{static_cast<C>(lr),
                              static_cast<C>(weight_decay),
                              static_cast<C>(options_.alpha),
                              static_cast<C>(1.0 - options_.alpha),
                              static_cast<C>(options_.eps),
                              static_cast<C>(options_.momentum),
                              options_.centered};
    T* p = param.data<T>();
    visit_state_type<T>(st.buffers.at("square_avg"), [&]<typename S>() {
      S* sq = st.buffers.at("square_avg").data<S>();
      S* ga = options_.centered ? st.buffers.at("grad_avg").data<S>() : nullptr;
      S* buf = options_.momentum > 0 ? st.buffers.at("momentum_buffer").data<S>() : nullptr;
      visit_floating(grad.dtype(), "RMSprop.step", [&]<typename G>() {
        const G* g = grad.data<G>();
        cpu::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            C sqi = load(sq[i]), gai = ga ? load(ga[i]) : C(0), bufi = buf ? load(buf[i]) : C(0);
            p[i] = store<T>(rmsprop_element<C>(load(p[i]), static_cast<C>(load(g[i])), sqi, gai, bufi, s));
            sq[i] = store<S>(sqi);
            if (ga) ga[i] = store<S>(gai);
            if (buf) buf[i] = store<S>(bufi);
          }
        });
      });
    });
  });
}

}  // namespace hg::optim
