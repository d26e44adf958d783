// SGD's fused update: one pass over parameter, gradient and momentum buffer, in f32
// (f64 for f64 parameters), rounding the parameter once.
#include "framework/optim/sgd.h"

#include "framework/optim/state_type.h"
#include "ops/cpu/loops.h"

namespace hg::optim {

namespace {

template <class C>
struct SGDScalars {
  C lr, weight_decay, momentum, dampening_complement;
  bool first_step, nesterov;
};

// One element of the update; `buf` is the momentum buffer (unused when momentum is 0).
// Written so a CUDA kernel can run it as is.
template <class C>
inline C sgd_element(C p, C g, C& buf, const SGDScalars<C>& s) {
  C d = g;
  if (s.weight_decay != C(0)) d = d + s.weight_decay * p;
  if (s.momentum != C(0)) {
    buf = s.first_step ? d : s.momentum * buf + s.dampening_complement * d;
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  return p - s.lr * d;
}

}  // namespace

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

void SGD::update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay) {
  const int64_t n = param.numel();
  visit_floating(param.dtype(), "SGD.step", [&]<typename T>() {
    using C = compute_t<T>;
    const SGDScalars<C> s{static_cast<C>(lr),
                          static_cast<C>(weight_decay),
                          static_cast<C>(options_.momentum),
                          static_cast<C>(1.0 - options_.dampening),
                          st.step == 1,
                          options_.nesterov};
    T* p = param.data<T>();
    auto body = [&]<typename S>() {
      S* buf = options_.momentum != 0 ? st.buffers.at("momentum_buffer").data<S>() : nullptr;
      visit_floating(grad.dtype(), "SGD.step", [&]<typename G>() {
        const G* g = grad.data<G>();
        cpu::parallel_for(n, 8, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            C b = buf ? load(buf[i]) : C(0);
            p[i] = store<T>(sgd_element<C>(load(p[i]), static_cast<C>(load(g[i])), b, s));
            if (buf) buf[i] = store<S>(b);
          }
        });
      });
    };
    if (options_.momentum != 0) visit_state_type<T>(st.buffers.at("momentum_buffer"), body);
    else body.template operator()<C>();
  });
}

}  // namespace hg::optim
