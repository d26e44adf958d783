// The optimizers' CPU kernels: one parallel pass over parameter, gradient and state in
// the compute type (f32, f64 for f64), f16/bf16 widened a block at a time by the vector
// conversions, each value rounded once on store. Adam in f32 runs its rule on F8 lanes.
#include "ops/optim_kernels.h"
#include "ops/optim_state_type.h"
#include <algorithm>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/cpu/vec/map8.h"
#include "ops/cpu/vec/widen.h"

#ifdef HG_VEC8
// The update rules' helpers on F8, found by argument-dependent lookup: the same correctly
// rounded square root and the same NaN-to-b maximum as the scalar forms.
namespace hg::cpu::vec {
inline F8 rule_sqrt(F8 a) { return sqrt_of(a); }
inline F8 rule_max(F8 a, F8 b) { return select(a > b, a, b); }
}  // namespace hg::cpu::vec
#endif

namespace hg::optim {
namespace {

constexpr int64_t kBlock = 256;

// Runs Adam's rule on the first whole groups of 8 of a widened f32 block; returns how
// many elements it did (the rest go through the scalar rule, which gives the same bits).
template <class Rule, class C, class K>
int64_t vector_part(C* p, const C* g, C* const* st, int64_t m, const K& s) {
#ifdef HG_VEC8
  if constexpr (std::is_same_v<Rule, AdamRule> && std::is_same_v<C, float>) {
    using cpu::vec::F8;
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) {
      F8 v[3];
      for (int k = 0; k < 3; ++k) v[k] = st[k] ? cpu::vec::load8(st[k] + i) : F8(0.0f);
      cpu::vec::store8(p + i, adam_element(cpu::vec::load8(p + i), cpu::vec::load8(g + i), v[0], v[1], v[2], s));
      for (int k = 0; k < 3; ++k)
        if (st[k]) cpu::vec::store8(st[k] + i, v[k]);
    }
    return i;
  }
#endif
  return 0;
}

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
            for (int64_t i = vector_part<Rule>(pv, gv, sv, m, s); i < m; ++i) {
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
