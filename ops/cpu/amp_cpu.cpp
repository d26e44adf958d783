// CPU kernels of the loss scaler: the fused unscale + non-finite count, and the scale
// update state machine (the same arithmetic a CUDA kernel does, in f32).
#include <cmath>

#include "ops/amp_kernels.h"
#include "ops/cpu/loops.h"

namespace hg::cpu {
namespace {

void unscale_and_check_cpu(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf,
                           const Tensor& counts) {
  const float inv = *inv_scale.data<float>();
  int64_t* cnt = counts.data<int64_t>();
  bool any = false;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    HG_CHECK(g.is_contiguous(), "unscale: gradient ", i, " is not contiguous");
    int64_t bad = 0;
    visit_floating(g.dtype(), "unscale", [&]<typename T>() {
      T* p = g.data<T>();
      using C = compute_t<T>;
      const C s = static_cast<C>(inv);
      const int64_t n = g.numel();
      const int threads = n > 65536 ? omp_get_max_threads() : 1;
#pragma omp parallel for reduction(+ : bad) num_threads(threads) schedule(static)
      for (int64_t k = 0; k < n; ++k) {
        const C v = load(p[k]) * s;
        p[k] = store<T>(v);
        bad += !std::isfinite(static_cast<double>(load(p[k])));
      }
    });
    cnt[i] = bad;
    any = any || bad > 0;
  }
  if (any) *found_inf.data<float>() = 1.0f;
}

void update_scale_cpu(const Tensor& scale, const Tensor& growth_tracker, const Tensor& hysteresis_tracker,
                      const Tensor& found_inf, const ScaleUpdateParams& p) {
  update_scale_rule(*scale.data<float>(), *growth_tracker.data<int64_t>(), *hysteresis_tracker.data<int64_t>(),
                    *found_inf.data<float>(), p);
}

}  // namespace

HG_REGISTER_KERNEL(unscale_and_check_stub, cpu, unscale_and_check_cpu);
HG_REGISTER_KERNEL(update_scale_stub, cpu, update_scale_cpu);

}  // namespace hg::cpu
