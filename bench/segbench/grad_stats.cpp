// Gradient statistics on stored gradients: a flush counted here is a zero that backward
// really produced (scaled f16), never a guess from unscaled f32 values; the unscaled
// counterfactual is kept apart and only for gradients stored wider than f16.
#include "bench/segbench/grad_stats.h"

#include <algorithm>
#include <cmath>

namespace hg::segbench {

std::vector<LayerStats> stored_gradient_stats(const std::vector<std::pair<std::string, Tensor>>& params, double scale) {
  std::vector<LayerStats> out;
  for (auto& [name, p] : params) {
    if (!p.grad().defined()) continue;
    LayerStats s;
    s.name = name;
    s.grad_dtype = dtype_name(p.grad().dtype());
    const bool stored_f16 = p.grad().dtype() == f16;
    const std::vector<double> g = p.grad().to_vector<double>();
    double sq = 0;
    int64_t zero = 0, would_flush = 0, sub = 0;
    for (double v : g) {
      const double a = std::abs(v);
      if (a == 0) ++zero;
      else if (a / scale <= kF16FlushMax) ++would_flush;
      if (a > kF16FlushMax && a < kF16NormalMin) ++sub;
      s.grad_amax = std::max(s.grad_amax, a / scale);
      sq += (v / scale) * (v / scale);
    }
    const double n = static_cast<double>(std::max<size_t>(g.size(), 1));
    s.grad_zero_fraction = static_cast<double>(zero) / n;
    s.grad_underflow_fraction = stored_f16 ? -1.0 : static_cast<double>(would_flush) / n;
    s.grad_subnormal_fraction = static_cast<double>(sub) / n;
    s.grad_norm = std::sqrt(sq);
    out.push_back(s);
  }
  return out;
}

GradientExponents gradient_exponents(const Tensor& grad, double scale) {
  GradientExponents e;
  e.dtype = dtype_name(grad.dtype());
  e.scale = scale;
  e.bins.assign(GradientExponents::kHi - GradientExponents::kLo + 1, 0);
  const std::vector<double> g = grad.to_vector<double>();
  e.numel = static_cast<int64_t>(g.size());
  int64_t would_flush = 0;
  for (double v : g) {
    const double a = std::abs(v);
    if (a == 0) {
      ++e.zeros;
      continue;
    }
    if (!std::isfinite(a)) {
      ++e.overflow;
      continue;
    }
    if (a <= kF16FlushMax) ++e.flush;
    else if (a < kF16NormalMin) ++e.subnormal;
    else if (a >= kF16OverflowMin) ++e.overflow;
    if (a / scale <= kF16FlushMax) ++would_flush;
    const int k = std::clamp(static_cast<int>(std::floor(std::log2(a))), GradientExponents::kLo, GradientExponents::kHi);
    ++e.bins[static_cast<size_t>(k - GradientExponents::kLo)];
  }
  e.would_flush = e.numel ? static_cast<double>(would_flush) / static_cast<double>(e.numel) : 0.0;
  return e;
}

}  // namespace hg::segbench
