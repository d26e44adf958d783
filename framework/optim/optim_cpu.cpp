// The optimizers' CPU kernels: one parallel pass over parameter, gradient and state in
// the compute type (f32, f64 for f64), each value rounded once on store.
#include "framework/optim/optim_kernels.h"
#include "framework/optim/state_type.h"
#include "ops/cpu/loops.h"

namespace hg::optim {
namespace {

template <class Rule>
void step_cpu(const Tensor& param, const Tensor& grad, const StateBuffers& state, const typename Rule::Hyper& h,
              const StepClock& clock) {
  const int64_t n = param.numel();
  visit_floating(param.dtype(), "optimizer step", [&]<typename T>() {
    using C = compute_t<T>;
    const auto s = Rule::template scalars<C>(h, static_cast<double>(clock.count));
    T* p = param.data<T>();
    auto body = [&]<typename S>() {
      S* b[3];
      for (size_t k = 0; k < 3; ++k) b[k] = state[k].defined() ? state[k].data<S>() : nullptr;
      visit_floating(grad.dtype(), "optimizer step", [&]<typename G>() {
        const G* g = grad.data<G>();
        cpu::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            C v[3];
            for (int k = 0; k < 3; ++k) v[k] = b[k] ? C(load(b[k][i])) : C(0);
            p[i] = store<T>(Rule::apply(C(load(p[i])), static_cast<C>(load(g[i])), v, s));
            for (int k = 0; k < 3; ++k)
              if (b[k]) b[k][i] = store<S>(v[k]);
          }
        });
      });
    };
    const Tensor* first = nullptr;
    for (const Tensor& t : state)
      if (!first && t.defined()) first = &t;
    if (first) visit_state_type<T>(*first, body);
    else body.template operator()<C>();
  });
}

}  // namespace

HG_REGISTER_KERNEL(adam_step_stub, cpu, step_cpu<AdamRule>);
HG_REGISTER_KERNEL(sgd_step_stub, cpu, step_cpu<SGDRule>);
HG_REGISTER_KERNEL(rmsprop_step_stub, cpu, step_cpu<RMSpropRule>);

}  // namespace hg::optim
