// The optimizers' CPU kernels: one parallel pass over parameter, gradient and state in
// the compute type (f32, f64 for f64), f16/bf16 widened a block at a time by the vector
// conversions, each value rounded once on store.
#include "framework/optim/optim_kernels.h"
#include "framework/optim/state_type.h"
#include <algorithm>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/cpu/vec/widen.h"

namespace hg::optim {
namespace {

constexpr int64_t kBlock = 256;

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
        // Blocks of kBlock elements widened to C (in place when already C), updated, and
        // rounded back once: the per-element arithmetic is the rule's, unchanged.
        cpu::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
          std::vector<C> pbuf, gbuf, sbuf[3];
          for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
            const int64_t m = std::min(kBlock, end - i0);
            C* pv = cpu::vec::as_compute<C>(p + i0, m, pbuf);
            const C* gv = cpu::vec::as_compute<C>(g + i0, m, gbuf);
            C* sv[3] = {};
            for (size_t k = 0; k < 3; ++k)
              if (b[k]) sv[k] = cpu::vec::as_compute<C>(b[k] + i0, m, sbuf[k]);
            for (int64_t i = 0; i < m; ++i) {
              C v[3];
              for (int k = 0; k < 3; ++k) v[k] = sv[k] ? sv[k][i] : C(0);
              pv[i] = Rule::apply(pv[i], gv[i], v, s);
              for (int k = 0; k < 3; ++k)
                if (sv[k]) sv[k][i] = v[k];
            }
            cpu::vec::write_back(pv, p + i0, m);
            for (size_t k = 0; k < 3; ++k)
              if (b[k]) cpu::vec::write_back(sv[k], b[k] + i0, m);
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
