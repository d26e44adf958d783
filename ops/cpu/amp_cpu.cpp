// CPU kernels of the loss scaler: the fused unscale + non-finite count, and the scale
// update state machine (the same arithmetic a CUDA kernel does, in f32).
#include <algorithm>
#include <cmath>

#include "ops/amp_kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec/map8.h"

namespace hg::cpu {
namespace {

constexpr int64_t kBlock = 4096;

// Multiplies n values by s in place, each rounded once into T, and counts the results that
// are not finite (after rounding: an f16 product can overflow only there).
template <class T>
int64_t unscale_block(T* p, int64_t n, float inv) {
  using C = compute_t<T>;
  const C s = static_cast<C>(inv);
  int64_t bad = 0, i = 0;
#ifdef HG_VEC8
  if constexpr (vec::kVec8<T>) {
    const vec::F8 sv(s), zero(0.0f);
    for (; i + 8 <= n; i += 8) {
      vec::store8(p + i, vec::load8(p + i) * sv);
      const vec::F8 r = vec::load8(p + i);
      bad += vec::count(r - r != zero);  // x - x is 0 exactly for finite x, NaN otherwise
    }
  }
#endif
  for (; i < n; ++i) {
    p[i] = store<T>(load(p[i]) * s);
    bad += !std::isfinite(static_cast<double>(load(p[i])));
  }
  return bad;
}

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
      const int64_t n = g.numel();
      const int threads = n > 65536 ? op_threads() : 1;
      // Whole blocks per thread; the count is an integer sum, so any split gives the same total.
      const int64_t blocks = (n + kBlock - 1) / kBlock;
      std::atomic<int64_t> total{0};
      parallel_run(static_cast<int>(std::min<int64_t>(threads, blocks)), [&](int t) {
        const int nt = static_cast<int>(std::min<int64_t>(threads, blocks));
        int64_t mine = 0;
        for (int64_t b = blocks * t / nt, end = blocks * (t + 1) / nt; b < end; ++b)
          mine += unscale_block(p + b * kBlock, std::min(kBlock, n - b * kBlock), inv);
        total.fetch_add(mine, std::memory_order_relaxed);
      });
      bad = total.load();
    });
    cnt[i] = bad;
    any = any || bad > 0;
  }
  if (any) *found_inf.data<float>() = 1.0f;
}

void update_scale_cpu(const ScaleState& st, const Tensor& found_inf, const ScaleUpdateParams& p) {
  update_scale_rule(*st.scale.data<float>(), *st.growth_tracker.data<int64_t>(), *st.hysteresis_tracker.data<int64_t>(),
                    *st.skip_streak.data<int64_t>(), *found_inf.data<float>(), p);
}

}  // namespace

HG_REGISTER_KERNEL(unscale_and_check_stub, cpu, unscale_and_check_cpu);
HG_REGISTER_KERNEL(update_scale_stub, cpu, update_scale_cpu);

}  // namespace hg::cpu
